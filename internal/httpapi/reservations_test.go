package httpapi_test

import (
	"context"
	"encoding/csv"
	"fmt"
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
