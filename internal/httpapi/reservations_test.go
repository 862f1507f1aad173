package httpapi_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// reservationSale is a reservation sale of 10 units in two waves ten minutes apart, its
// reservations open from 12:00 (the fixture's clock) until its start at 12:30.
const reservationSale = `{"name":"Launch","kind":"item","stock":10,"price_cents":500,"admission":"reservation",
	"reserve_from":"2001-11-30T12:00:00Z","waves":2,"wave_interval_s":600,
	"start_at":"2001-11-30T12:30:00Z","end_at":"2001-11-30T13:30:00Z"}`

// TestReservationsOverHTTP follows a reservation sale through the API: reservations numbered in
// order, a second call answering the first, the refusals of another admission and of the
// close, the grab refused before the start, while the waves are assigned, to a stranger and
// before the buyer's wave (425 with the seconds to its opening), and taken in the wave.
func TestReservationsOverHTTP(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(reservationSale)
	reserve := func(user string) response {
		return f.do("POST", "/api/activities/"+id+"/reservations", f.user(user), "")
	}
	grab := func(user string) response {
		return f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "")
	}
	mine := func(user string) response {
		return f.do("GET", "/api/activities/"+id+"/reservations/me", f.user(user), "")
	}
	for i, u := range []string{"alice", "bob", "carol"} {
		r := reserve(u)
		if r.status != 201 || r.body["number"] != float64(i+1) || r.body["user_id"] != u || r.body["wave"] != nil || r.body["opens_at"] != nil {
			t.Fatalf("%s reserves: %d %s; want 201 number %d, no wave yet", u, r.status, r.raw, i+1)
		}
	}
	if r := reserve("bob"); r.status != 200 || r.body["number"] != 2.0 {
		t.Fatalf("bob again: %d %s; want 200 and his number", r.status, r.raw)
	}
	if r := mine("dave"); r.status != 404 || r.code() != "NOT_RESERVED" {
		t.Fatalf("dave's reservation: %d %s; want 404 NOT_RESERVED", r.status, r.raw)
	}
	if r := f.do("POST", "/api/activities/"+id+"/reservations", "", ""); r.status != 401 {
		t.Fatalf("a reservation without a token: %d %s", r.status, r.raw)
	}
	direct := f.create(validItem)
	if r := f.do("POST", "/api/activities/"+direct+"/reservations", f.user("alice"), ""); r.status != 409 || r.code() != "NOT_RESERVABLE" {
		t.Fatalf("a reservation of a direct sale: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/activities/nope/reservations", f.user("alice"), ""); r.status != 404 || r.code() != "NOT_FOUND" {
		t.Fatalf("a reservation of no activity: %d %s", r.status, r.raw)
	}
	if r := grab("alice"); r.status != 403 || r.code() != "NOT_STARTED" {
		t.Fatalf("a grab before the start: %d %s", r.status, r.raw)
	}
	view := f.do("GET", "/api/activities/"+id, "", "")
	terms, _ := view.body["reservation"].(map[string]any)
	if opens, _ := terms["wave_opens_at"].([]any); len(opens) != 2 || opens[1] != "2001-11-30T12:40:00Z" || terms["draw_seed"] != nil {
		t.Fatalf("the sale's terms before the start: %s", view.raw)
	}

	f.clock.Advance(30 * time.Minute) // the start: the reservations close
	if r := reserve("dave"); r.status != 409 || r.code() != "RESERVATIONS_CLOSED" {
		t.Fatalf("a reservation at the start: %d %s", r.status, r.raw)
	}
	if r := grab("alice"); r.status != 425 || r.code() != "WAVE_NOT_OPEN" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("a grab before the gate has the waves: %d %s %v; want 425, Retry-After 1", r.status, r.raw, r.header)
	}
	if n, err := f.rsv.OpenDue(context.Background()); err != nil || n != 3 {
		t.Fatalf("OpenDue: %d, %v; want the 3 reservers given to the gate", n, err)
	}
	if r := grab("dave"); r.status != 403 || r.code() != "NOT_RESERVED" {
		t.Fatalf("a stranger's grab: %d %s", r.status, r.raw)
	}
	if r := grab("carol"); r.status != 425 || r.code() != "WAVE_NOT_OPEN" || r.header.Get("Retry-After") != "600" {
		t.Fatalf("carol, of wave 2, in wave 1: %d %s %v; want 425 with 600 s to wait", r.status, r.raw, r.header)
	}
	if r := mine("carol"); r.status != 200 || r.body["wave"] != 2.0 || r.body["opens_at"] != "2001-11-30T12:40:00Z" {
		t.Fatalf("carol's reservation after the close: %d %s", r.status, r.raw)
	}
	if r := reserve("alice"); r.status != 200 || r.body["wave"] != 1.0 {
		t.Fatalf("alice's reservation asked again after the close: %d %s", r.status, r.raw)
	}
	var bobsOrder string
	for _, u := range []string{"alice", "bob"} {
		r := grab(u)
		if r.status != 202 {
			t.Fatalf("%s in wave 1: %d %s", u, r.status, r.raw)
		}
		bobsOrder, _ = r.body["order_token"].(string)
	}
	f.clock.Advance(10 * time.Minute)
	if r := grab("carol"); r.status != 202 {
		t.Fatalf("carol in wave 2: %d %s", r.status, r.raw)
	}
	// The operators' view: per wave the reservers, who grabbed and who holds a unit (bob's
	// order cancelled); and every reservation as CSV.
	if r := f.do("POST", "/api/orders/"+bobsOrder+"/cancel", f.user("bob"), ""); r.status != 200 {
		t.Fatalf("bob cancels: %d %s", r.status, r.raw)
	}
	f.clock.Advance(10 * time.Second) // past the stats' 5 s
	st := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, "")
	rs, _ := st.body["reservation"].(map[string]any)
	if st.status != 200 || rs == nil || rs["reserved"] != 3.0 ||
		fmt.Sprint(rs["waves"]) != "[map[grabbed:2 reserved:2 wave:1 won:1] map[grabbed:1 reserved:1 wave:2 won:1]]" {
		t.Fatalf("stats: %d %s", st.status, st.raw)
	}
	req := httptest.NewRequest("GET", "/api/admin/activities/"+id+"/reservations.csv", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	rows, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil || rec.Code != 200 || len(rows) != 4 || strings.Join(rows[0], ",") != "user,number,wave,reserved_at" ||
		strings.Join(rows[3][:3], ",") != "carol,3,2" {
		t.Fatalf("reservations.csv: %d %v %v", rec.Code, rows, err)
	}
	if r := f.do("GET", "/api/admin/activities/"+direct+"/reservations.csv", adminToken, ""); r.status != 409 || r.code() != "NOT_RESERVABLE" {
		t.Fatalf("the reservations of a direct sale: %d %s", r.status, r.raw)
	}
	if r := grab("carol"); r.status != 409 || r.code() != "ALREADY_BOUGHT" {
		t.Fatalf("carol again: %d %s", r.status, r.raw)
	}
}

// TestForecastOverHTTP runs three reservation sales through the API, each of four reservers in
// two waves of whom three come, and a stranger: in wave 1 the stranger is refused, the first
// wave's two grab and the second's one is told to wait; in wave 2 it grabs again. Each sale's
// arrivals are flushed and its history kept when it is archived. A new sale's forecast is on the
// prior until three are kept, then on their history: 3 buyers a 4 reservations, 5 clicks a 3
// buyers, 4 of them in the busiest second.
// The plan is sized for its peak; bad terms are refused, and so is a sale of another admission.
func TestForecastOverHTTP(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	sale := func(reserved int) (string, time.Time) {
		now := f.clock.Now().UTC()
		start := now.Add(time.Hour)
		return f.create(fmt.Sprintf(`{"name":"Launch","kind":"item","stock":10,"price_cents":500,"admission":"reservation",
			"waves":2,"wave_interval_s":600,"start_at":%q,"end_at":%q,"pay_window_s":60}`,
			start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339))), start
	}
	forecast := func(id, query string) response {
		return f.do("GET", "/api/admin/activities/"+id+"/forecast"+query, adminToken, "")
	}
	for run := range 3 {
		id, start := sale(4)
		users := []string{"a", "b", "c", "d"}
		for _, u := range users {
			if r := f.do("POST", "/api/activities/"+id+"/reservations", f.user(u), ""); r.status != 201 {
				t.Fatalf("sale %d: %s reserves: %d %s", run, u, r.status, r.raw)
			}
		}
		fc := forecast(id, "")
		if fc.status != 200 || fc.body["basis"] != "prior" || fc.body["reserved"] != 4.0 || len(fc.body["history"].([]any)) != run {
			t.Fatalf("sale %d's forecast with %d sales kept: %d %s; want the prior", run, run, fc.status, fc.raw)
		}
		f.clock.Advance(start.Sub(f.clock.Now())) // to the start
		if _, err := f.rsv.OpenDue(ctx); err != nil {
			t.Fatal(err)
		}
		grab := func(u string, want int) {
			t.Helper()
			r := f.do("POST", "/api/activities/"+id+"/grab", f.user(u), "")
			if r.status != want {
				t.Fatalf("sale %d: %s grabs: %d %s; want %d", run, u, r.status, r.raw, want)
			}
			if tok, ok := r.body["order_token"].(string); ok { // paid at once: an archive waits for no order
				f.drain(id)
				if r := f.do("POST", "/api/orders/"+tok+"/pay", f.user(u), ""); r.status != 200 {
					t.Fatalf("%s pays: %d %s", u, r.status, r.raw)
				}
			}
		}
		grab("stranger", 403) // load too: counted, naming nobody who reserved
		grab("a", 202)
		grab("b", 202)
		grab("c", 425)
		f.clock.Advance(10 * time.Minute)
		grab("c", 202)
		if _, err := f.fc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(2 * time.Hour) // past the end and the pay window
		if n, err := f.svc.ArchiveDue(ctx, 0); err != nil || n != 1 {
			t.Fatalf("sale %d archived: %d, %v", run, n, err)
		}
	}
	id, _ := sale(8)
	for i := range 8 {
		f.do("POST", "/api/activities/"+id+"/reservations", f.user(fmt.Sprint("u", i)), "")
	}
	fc := forecast(id, "")
	model, _ := fc.body["model"].(map[string]any)
	history, _ := fc.body["history"].([]any)
	if fc.status != 200 || fc.body["basis"] != "history" || fc.body["reserved"] != 8.0 || len(history) != 3 || model["sales"] != 3.0 ||
		model["buyers_per_reservation"] != 0.75 || math.Abs(model["peak_factor"].(float64)-1.6) > 1e-9 {
		t.Fatalf("the forecast after three sales: %d %s", fc.status, fc.raw)
	}
	// 8 reserved: 6 buyers, 10 clicks, 5 a wave; the busiest second 1.6 times that (4 of a
	// sale's 5 clicks in one second, 2.5 a wave).
	if fc.body["expected_buyers"] != 6.0 || fc.body["expected_clicks"] != 10.0 || fc.body["expected_peak_rps"] != 8.0 {
		t.Errorf("the forecast: %s; want 6 buyers, 10 clicks, 8 requests a second at the peak", fc.raw)
	}
	h := history[0].(map[string]any)
	if h["reserved"] != 4.0 || h["buyers"] != 3.0 || h["clicks"] != 5.0 || h["peak_rps"] != 4.0 || h["waves"] != 2.0 {
		t.Errorf("a sale's history: %v; want 4 reserved, 3 buyers, 5 clicks, 4 in the busiest second", h)
	}
	plan, _ := fc.body["plan"].(map[string]any)
	if plan == nil || plan["api_nodes"].(float64) < 2 || fc.body["plan_error"] != nil {
		t.Errorf("the plan: %s; want one sized", fc.raw)
	}
	if r := forecast(id, "?min_replicas=2"); r.status != 200 || r.body["plan"] != nil || r.body["plan_error"] == nil {
		t.Errorf("a plan with replicas never measured: %d %s; want the forecast and why there is no plan", r.status, r.raw)
	}
	for _, q := range []string{"?cores=0", "?headroom=2", "?headroom=x", "?drain=-1m", "?drain=soon", "?cores=x", "?min_replicas=3"} {
		if r := forecast(id, q); r.status != 400 || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("forecast%s: %d %s; want 400 INVALID_ARGUMENT", q, r.status, r.raw)
		}
	}
	direct := f.create(validItem)
	if r := forecast(direct, ""); r.status != 409 || r.code() != "NOT_RESERVABLE" {
		t.Errorf("the forecast of a direct sale: %d %s", r.status, r.raw)
	}
	if r := forecast("nope", ""); r.status != 404 {
		t.Errorf("the forecast of no activity: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/activities/"+id+"/forecast", "", ""); r.status != 401 {
		t.Errorf("the forecast without a token: %d %s", r.status, r.raw)
	}
}

// TestForecastNamesTheSoldOutCrowd: a reserver turned away by the node's sold-out flag, before
// its token is read, is still named as having clicked: after a sell-out the buyers do not read
// low. A stranger's click is counted as load and names no reservation.
func TestForecastNamesTheSoldOutCrowd(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	start := f.clock.Now().UTC().Add(time.Hour)
	id := f.create(fmt.Sprintf(`{"name":"Launch","kind":"item","stock":1,"price_cents":500,"admission":"reservation",
		"start_at":%q,"end_at":%q}`, start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339)))
	for _, u := range []string{"a", "b", "c"} {
		f.do("POST", "/api/activities/"+id+"/reservations", f.user(u), "")
	}
	f.clock.Advance(time.Hour)
	if _, err := f.rsv.OpenDue(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		user string
		want int
	}{{"a", 202}, {"b", 410}, {"c", 410}, {"c", 410}, {"stranger", 410}} {
		if r := f.do("POST", "/api/activities/"+id+"/grab", f.user(g.user), ""); r.status != g.want {
			t.Fatalf("%s grabs: %d %s; want %d", g.user, r.status, r.raw, g.want)
		}
	}
	if _, err := f.fc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	per, clicked, err := f.store.Arrivals(ctx, id)
	if err != nil || clicked != 3 {
		t.Fatalf("arrivals %v, %d reservers clicked, %v; want a, b and c", per, clicked, err)
	}
	var clicks int64
	for _, n := range per {
		clicks += n
	}
	if clicks != 5 {
		t.Errorf("%d clicks counted; want the 5, the stranger's too", clicks)
	}
}
