package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/auth"
	"seckill/internal/browsertest"
	"seckill/internal/httpapi"
	"seckill/internal/httpapi/wire"
	"seckill/internal/node"
	"seckill/internal/openapitest"
	"seckill/internal/paytest"
	"seckill/internal/ratelimit"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/signature"

	"seckill/internal/node/nodetest"
)

const admin = "admin-token-for-the-browser-tests"

// skew is how far the server's clock runs ahead of the browser's: a page that counted down on
// its own clock would be an hour late.
const skew = time.Hour

// site is the whole server (API, pages, a worker): the embedded node as the binary builds and
// serves it, on a clock an hour ahead of the browser's.
type site struct {
	t      *testing.T
	url    string
	env    saletest.Env
	tokens *auth.Tokens
	api    *httpapi.Server
}

func newSite(t *testing.T) *site {
	t.Helper()
	return newSiteWith(t, func(*node.Config) {}, nil)
}

// newSiteWith is newSite with the node's configuration adjusted by set, and its handler wrapped
// by wrap (when not nil).
func newSiteWith(t *testing.T, set func(c *node.Config), wrap func(http.Handler) http.Handler) *site {
	t.Helper()
	clock := saletest.RealClock()
	clock.Advance(skew)
	env, n := nodetest.Served(t, clock, func(c *node.Config) {
		c.API.AdminToken, c.API.DevLogin = admin, true
		set(c)
	})
	tokens, err := auth.New([]byte(nodetest.Secret), clock.Now) // mints what the node's tokens verify
	if err != nil {
		t.Fatal(err)
	}
	api := n.API
	h := n.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	// What the pages send and are answered is held to the OpenAPI document too.
	srv := httptest.NewServer(openapitest.Handler(t, h, openapitest.APIPath))
	t.Cleanup(func() {
		api.StopStreams()
		srv.Close()
	})
	return &site{t: t, url: srv.URL, env: env, tokens: tokens, api: api}
}

// create makes an activity starting in (server time) start from now and running for an hour.
func (s *site) create(a sale.Activity, start time.Duration) sale.Activity {
	s.t.Helper()
	now := s.env.Clock.Now()
	if a.PerUserLimit == 0 {
		a.PerUserLimit = 1
	}
	a.StartAt, a.EndAt, a.PayWindow = now.Add(start), now.Add(start+time.Hour), 15*time.Minute
	a, err := s.env.Service.CreateActivity(context.Background(), a)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

// grab grabs through the API as user, returning the status code.
// health is the node's health level as the admin stats of activity id say it.
func (s *site) health(id string) string {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.url+"/api/admin/activities/"+id+"/stats", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.t.Fatal(err)
	}
	return st.Health.String()
}

func (s *site) grab(id, user string) int {
	s.t.Helper()
	tok, err := s.tokens.Mint(user, s.env.Clock.Now(), time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.url+"/api/activities/"+id+"/grab", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// signIn signs user in through the product page's demo login.
func signIn(b *browsertest.Browser, user string) {
	b.Do(chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("user"), user),
		submit("login"))
	b.WaitFor(`document.getElementById("login").hidden && document.getElementById("session").textContent.includes(`+
		strconv.Quote(user)+`)`, 10*time.Second, user+" signed in")
}

// openSale opens a's page, signs user in and waits for the grab button to open.
func openSale(b *browsertest.Browser, s *site, a sale.Activity, user string) {
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, user)
	b.WaitFor(`!document.getElementById("grab").disabled`, 10*time.Second, "the button open")
}

// submit submits a form the way its submit button does (chromedp.Submit calls form.submit(),
// which skips the page's submit handler).
func submit(form string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.getElementById(` + strconv.Quote(form) + `).requestSubmit()`)
}

// setValue sets an input's value as a script would.
func setValue(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.getElementById(` + strconv.Quote(id) + `).value = ` + strconv.Quote(v))
}

func signOut(b *browsertest.Browser) {
	b.Do(chromedp.Click(chromedp.CSS("#session button")))
	b.WaitFor(`!document.getElementById("login").hidden`, 10*time.Second, "signed out")
}

func status(b *browsertest.Browser) string { return b.Text("status") }

func TestProductPageJourney(t *testing.T) {
	s := newSite(t)
	// Eight seconds ahead: time for a browser on a busy machine to start and show the countdown
	// and for the user to sign in before the start.
	a := s.create(sale.Activity{Name: "Phone X", Kind: sale.KindItem, Stock: 5, PriceCents: 99_900, PerUserLimit: 2}, 8*time.Second)
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	b.WaitFor(`!document.getElementById("product").hidden`, 10*time.Second, "the product shown")
	if got := b.Text("name"); got != "Phone X" {
		t.Errorf("name = %q", got)
	}
	if got := b.Text("price"); got != "999.00" {
		t.Errorf("price = %q, want 999.00", got)
	}
	// The countdown runs on the server's clock, an hour ahead of the browser's: it shows
	// seconds, not an hour.
	b.WaitFor(`/^00:00:0[1-8]$/.test(document.getElementById("clock").textContent)`, 8*time.Second,
		"a countdown of a few seconds")
	if got := b.Text("clock-label"); got != "Starts in" {
		t.Errorf("clock label = %q before the start", got)
	}
	if got := b.Text("grab"); got != "Sign in to grab" || !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) {
		t.Errorf("button before sign-in: %q", got)
	}
	signIn(b, "alice")
	if !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) || b.Text("grab") != "Not started yet" {
		t.Errorf("button before the start: %q, disabled %v", b.Text("grab"),
			browsertest.Eval[bool](b, `document.getElementById("grab").disabled`))
	}
	b.Screenshot("product-countdown")

	// The countdown reaches zero and the button opens, not before the server says the sale is on.
	b.WaitFor(`!document.getElementById("grab").disabled`, 15*time.Second, "the button to open at the start")
	if now := s.env.Clock.Now(); now.Before(a.StartAt.Add(-time.Second)) {
		t.Errorf("the button opened at %v (server time), the sale starts at %v", now, a.StartAt)
	}
	if got := b.Text("clock-label"); got != "Ends in" {
		t.Errorf("clock label = %q after the start", got)
	}

	// A double click grabs once: the button rests after the first click. (The limit is 2, so a
	// second grab would have been sold.)
	b.Do(chromedp.Evaluate[chromedp.Void](`(() => { const g = document.getElementById("grab"); g.click(); g.click(); })()`))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second,
		"the order to be created")
	if got := b.Text("order-amount"); got != "999.00" {
		t.Errorf("order amount = %q", got)
	}
	if due := b.Text("order-due"); !strings.HasPrefix(due, "00:1") {
		t.Errorf("pay within %q, want about 15 minutes", due)
	}
	b.Screenshot("product-created")
	b.Do(chromedp.Click(chromedp.ID("pay")))
	b.WaitFor(`document.getElementById("order-status").textContent === "Paid"`, 10*time.Second, "the order paid")
	if got := status(b); got != "Paid. Thank you!" {
		t.Errorf("status = %q", got)
	}
	b.Screenshot("product-paid")

	st, err := s.env.Service.Stats(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Grabbed != 1 || st.Paid != 1 {
		t.Errorf("after a double click and a payment: %+v; want 1 grabbed, 1 paid", st)
	}

	// A reload finds the order again.
	b.Do(chromedp.Reload())
	b.WaitFor(`document.getElementById("order-status").textContent === "Paid"`, 10*time.Second, "the paid order after a reload")
}

func TestAlreadyBoughtAndSoldOut(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Two left", Kind: sale.KindItem, Stock: 2, PriceCents: 500}, 0)
	b := browsertest.New(t, 1280, 900)
	openSale(b, s, a, "alice")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second, "alice's order")

	// Alice on another device: the page does not know her order, the server does.
	b.Do(chromedp.Evaluate[chromedp.Void](`localStorage.removeItem("seckill.order.`+a.ID+`.alice")`), chromedp.Reload())
	b.WaitFor(`!document.getElementById("grab").disabled`, 10*time.Second, "the button open again")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("status").textContent === "You already bought this."`, 10*time.Second, "already bought")
	if got := b.Text("grab"); got != "Already bought" || !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) {
		t.Errorf("button after ALREADY_BOUGHT: %q", got)
	}

	if code := s.grab(a.ID, "bob"); code != http.StatusAccepted {
		t.Fatalf("bob's grab: %d", code)
	}
	signOut(b)
	signIn(b, "carol")
	b.WaitFor(`!document.getElementById("grab").disabled`, 10*time.Second, "the button open for carol")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("status").textContent === "Sold out."`, 10*time.Second, "sold out")
	if got := b.Text("grab"); got != "Sold out" || !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) {
		t.Errorf("button after SOLD_OUT: %q", got)
	}
	b.Screenshot("product-sold-out")
}

func TestRateLimitedOnThePage(t *testing.T) {
	// The activity takes one grab a second, on buckets whose clock stands still: once bob has
	// taken the second's grab, every other is refused until the test ends.
	frozen := time.Now()
	s := newSiteWith(t, func(c *node.Config) {
		c.Wrap.Buckets = func(ratelimit.Limiter) ratelimit.Limiter {
			return ratelimit.NewBuckets(func() time.Time { return frozen })
		}
	}, nil)
	a := s.create(sale.Activity{Name: "Throttled", Kind: sale.KindItem, Stock: 10, PriceCents: 100,
		Rates: sale.Rates{Global: 1}}, 0)
	b := browsertest.New(t, 1280, 900)
	openSale(b, s, a, "alice")
	if code := s.grab(a.ID, "bob"); code != http.StatusAccepted {
		t.Fatalf("bob's grab: %d", code)
	}
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("status").textContent === "Too many tries: wait 1 s."`, 10*time.Second, "rate limited")
	// The button rests (at least the 3 s debounce), then opens again for another try.
	if !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) || !strings.HasPrefix(b.Text("grab"), "Wait ") {
		t.Errorf("button right after a 429: %q", b.Text("grab"))
	}
	b.WaitFor(`!document.getElementById("grab").disabled && document.getElementById("grab").textContent === "Grab"`,
		10*time.Second, "the button open again after the wait")
	if st, err := s.env.Service.Stats(context.Background(), a.ID); err != nil || st.Grabbed != 1 {
		t.Errorf("stats %+v, %v; want bob's grab only", st, err)
	}
}

// failing is a rate limiter that cannot answer while down is set: the grab fails closed, 503.
type failing struct {
	ratelimit.Limiter
	down *atomic.Bool
}

func (f failing) Allow(ctx context.Context, key string, r ratelimit.Rule) (ratelimit.Decision, error) {
	if f.down.Load() {
		return ratelimit.Decision{}, errors.New("the limits' store does not answer")
	}
	return f.Limiter.Allow(ctx, key, r)
}

func TestBusyOnThePageKeepsTheKey(t *testing.T) {
	// The per-user limit's store fails: grabs are answered 503 BUSY. The page says so, opens the
	// button again after its rest, and the retry carries the first try's Idempotency-Key, so that
	// a first try that did go through could never buy a second unit.
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	var keys []string
	s := newSiteWith(t, func(c *node.Config) {
		c.API.Rates.User = 100
		c.Wrap.Buckets = func(b ratelimit.Limiter) ratelimit.Limiter { return failing{b, &down} }
	}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/grab") {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	a := s.create(sale.Activity{Name: "Flaky", Kind: sale.KindItem, Stock: 5, PriceCents: 100}, 0)
	b := browsertest.New(t, 1280, 900)
	openSale(b, s, a, "alice")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("status").textContent === "The sale is busy right now. Try again; your try is not lost."`,
		10*time.Second, "busy")
	down.Store(false)
	b.WaitFor(`!document.getElementById("grab").disabled`, 10*time.Second, "the button open again after its rest")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second, "the order")
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("grab requests carried keys %q; want two with the same key", keys)
	}
}

func TestChallengeOnThePage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Guarded", Kind: sale.KindItem, Stock: 3, PriceCents: 100, RequireChallenge: true}, 0)
	b := browsertest.New(t, 1280, 900)
	openSale(b, s, a, "alice")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`!document.getElementById("challenge").hidden && document.getElementById("challenge-img").complete &&
		document.getElementById("challenge-img").naturalWidth > 0`, 10*time.Second, "the challenge's picture")
	first := browsertest.Eval[string](b, `document.getElementById("challenge").dataset.challenge`)
	wrong := s.env.Answers.Of(t, first) + 1
	b.Do(chromedp.SendKeys(chromedp.ID("answer"), fmt.Sprint(wrong)), submit("challenge"))
	b.WaitFor(`document.getElementById("status").textContent === "Wrong answer: try this one." &&
		document.getElementById("challenge").dataset.challenge !== `+strconv.Quote(first), 10*time.Second, "a new challenge after a wrong answer")
	b.Screenshot("product-challenge")
	second := browsertest.Eval[string](b, `document.getElementById("challenge").dataset.challenge`)
	b.Do(chromedp.SendKeys(chromedp.ID("answer"), fmt.Sprint(s.env.Answers.Of(t, second))), submit("challenge"))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second,
		"the order after the right answer")
	if st, err := s.env.Service.Stats(context.Background(), a.ID); err != nil || st.Grabbed != 1 {
		t.Errorf("stats %+v, %v; want one grab", st, err)
	}
}

func TestRedPacketPage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Lucky rain", Kind: sale.KindRedPacket, Stock: 3, TotalCents: 3_000}, 0)
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	b.WaitFor(`!document.getElementById("product").hidden && !document.getElementById("board").hidden`, 10*time.Second,
		"the red packet and its leaderboard")
	if got := b.Text("price"); got != "30.00" {
		t.Errorf("total = %q, want 30.00", got)
	}
	signIn(b, "alice")
	b.WaitFor(`!document.getElementById("grab").disabled`, 10*time.Second, "the button open")
	if got := b.Text("grab"); got != "Grab a red packet" {
		t.Errorf("button = %q", got)
	}
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("amount").textContent.startsWith("You got ")`, 10*time.Second, "the amount won")
	won := strings.TrimPrefix(b.Text("amount"), "You got ")

	// The leaderboard refreshes on its own: alice, then bob and carol (who grab elsewhere).
	b.WaitFor(`document.querySelectorAll("#leaders tr").length === 1`, 10*time.Second, "alice on the board")
	for _, u := range []string{"bob", "carol"} {
		if code := s.grab(a.ID, u); code != http.StatusAccepted {
			t.Fatalf("%s's grab: %d", u, code)
		}
	}
	b.WaitFor(`document.querySelectorAll("#leaders tr").length === 3`, 10*time.Second, "three on the board")
	rows := browsertest.Eval[[][]string](b, `[...document.querySelectorAll("#leaders tr")].map(r => [...r.cells].map(c => c.textContent))`)
	var sum int64
	found := false
	for i, r := range rows {
		if r[0] != fmt.Sprint(i+1) {
			t.Errorf("row %d: rank %s", i, r[0])
		}
		found = found || r[1] == "alice" && r[2] == won
		c, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatalf("row %d amount %q", i, r[2])
		}
		sum += int64(c*100 + 0.5)
	}
	if !found || sum != 3_000 {
		t.Errorf("board %v: want alice with %s, and the three shares summing to 30.00", rows, won)
	}
	b.WaitFor(`document.getElementById("my-rank").textContent.startsWith("Your rank: ")`, 10*time.Second, "alice's rank")
	b.WaitFor(`document.getElementById("order-status").textContent === "Ready to claim"`, 10*time.Second, "the share's order")
	b.Do(chromedp.Click(chromedp.ID("pay")))
	b.WaitFor(`document.getElementById("order-status").textContent === "Claimed"`, 10*time.Second, "the share claimed")
	b.Screenshot("redpacket")
}

func TestProductPageOnAPhone(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Limited sneakers, size 42", Kind: sale.KindItem, Stock: 50, PriceCents: 129_900}, 90*time.Second)
	b := browsertest.New(t, 390, 844)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	// Nothing sticks out sideways, and the button is tall enough to hit.
	if w := browsertest.Eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %dpx wide on a 390px screen", w)
	}
	if h := browsertest.Eval[float64](b, `document.getElementById("grab").getBoundingClientRect().height`); h < 44 {
		t.Errorf("the grab button is %.0fpx tall, want at least 44", h)
	}
	b.Screenshot("product-phone")
}

func TestDashboardLive(t *testing.T) {
	s := newSite(t)
	b := browsertest.New(t, 1280, 1000)
	b.Do(chromedp.Navigate(s.url + "/admin"))
	b.Do(chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), "wrong"),
		submit("auth"))
	b.WaitFor(`document.getElementById("auth-error").textContent !== ""`, 10*time.Second, "the wrong token refused")
	b.Do(setValue("token", ""), chromedp.SendKeys(chromedp.ID("token"), admin), submit("auth"))
	b.WaitFor(`!document.getElementById("desk").hidden`, 10*time.Second, "the dashboard")
	if browsertest.Eval[string](b, `sessionStorage.getItem("seckill.admin")`) != admin ||
		browsertest.Eval[string](b, `localStorage.getItem("seckill.admin") || ""`) != "" {
		t.Error("the admin token must live in the session storage only")
	}
	// A node without a payment provider has no payments' routes: the desk does not call them,
	// and says why there is nothing to refund.
	b.WaitFor(`document.querySelector("#refunds tbody").textContent.startsWith("No payment provider on this node")`, 10*time.Second,
		"the refunds table without a provider")
	if got := b.Text("dead"); !strings.Contains(got, "None.") {
		t.Errorf("the dead letters of a node with none: %q", got)
	}

	// The form refuses what the API would, field by field, and creates nothing.
	b.Do(submit("create"))
	b.WaitFor(`document.getElementById("e-name").textContent === "A name is required."`, 5*time.Second, "the name required")
	if msg := b.Text("e-stock"); msg == "" {
		t.Error("no stock error for an empty stock")
	}
	if n := len(s.env.Service.Current()); n != 0 {
		t.Fatalf("%d activities after an invalid form", n)
	}
	start := time.Now().Add(-time.Minute).Format("2006-01-02T15:04:05") // in the browser's (UTC) zone
	b.Do(chromedp.SendKeys(chromedp.ID("c-name"), "Flash burst"),
		chromedp.SendKeys(chromedp.ID("c-stock"), "50"),
		chromedp.SendKeys(chromedp.ID("c-money"), "19.90"),
		setValue("c-start", start),
		setValue("c-end", time.Now().Add(-2*time.Minute).Format("2006-01-02T15:04:05")),
		submit("create"))
	b.WaitFor(`document.getElementById("e-end").textContent === "The end must come after the start."`, 5*time.Second,
		"an end before the start refused")
	b.Do(setValue("c-shards", "80"), submit("create"))
	b.WaitFor(`document.getElementById("e-shards").textContent === "A whole number from 1 to 64."`, 5*time.Second,
		"too many stock shards refused")
	b.Do(setValue("c-shards", "1"))
	// The server's clock runs an hour ahead of the browser's: the sale is open on it.
	b.Do(setValue("c-start", time.Now().Add(skew-time.Minute).Format("2006-01-02T15:04:05")),
		setValue("c-end", time.Now().Add(skew+time.Hour).Format("2006-01-02T15:04:05")),
		submit("create"))
	b.WaitFor(`document.getElementById("create-result").textContent.startsWith("Created ")`, 10*time.Second, "the activity created")
	acts := s.env.Service.Current()
	if len(acts) != 1 || acts[0].Name != "Flash burst" || acts[0].Stock != 50 || acts[0].PriceCents != 1990 {
		t.Fatalf("created %+v", acts)
	}
	id := acts[0].ID
	b.WaitFor(`!document.getElementById("live").hidden && document.getElementById("t-stock").textContent === "50"`,
		10*time.Second, "the live view of the new activity")

	// A burst of grabs, spread over three seconds, while the dashboard watches.
	var wg sync.WaitGroup
	codes := make(chan int, 300)
	for i := range 300 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			codes <- s.grab(id, fmt.Sprint("u", i))
		})
	}
	b.WaitFor(`Number(document.getElementById("t-rate").textContent.replace(/,/g, "")) > 0`, 10*time.Second,
		"grabs per second above zero during the burst")
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusAccepted] != 50 || count[http.StatusGone] != 250 {
		t.Fatalf("burst answers %v, want 50 × 202 and 250 × 410", count)
	}
	s.env.Drain(id)
	b.WaitFor(`document.getElementById("t-remaining").textContent === "0" &&
		document.querySelector('[data-stage="won"] .n').textContent === "50" &&
		document.querySelector('[data-stage="ordered"] .n').textContent === "50" &&
		document.querySelector('[data-stage="sold_out"] .n').textContent === "250"`, 10*time.Second,
		"the funnel after the burst: 50 won and ordered, 250 sold out")
	// The health tile shows the node's level as its stats say it: normal on an idle machine, a
	// warning when a loaded one made the burst's latencies slow (the latency rule, not a fault).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tile, level := b.Text("t-health"), s.health(id)
		if tile == level && (level == "normal" || level == "warning") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("health tile %q, the node's level %q; want the same, normal or warning", tile, level)
			break
		}
	}
	// The charts were drawn: the rate chart's red (won) line rises above its zero line
	// somewhere, below the legend.
	if !browsertest.Eval[bool](b, `(() => { const c = document.getElementById("c-rate"), r = window.devicePixelRatio || 1;
		const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		for (let y = Math.ceil(24 * r); y < c.height - Math.ceil(22 * r); y++)
			for (let x = 0; x < c.width; x++) { const i = (y * c.width + x) * 4;
				if (d[i] > 150 && d[i+1] < 80 && d[i+2] < 80) return true; }
		return false; })()`) {
		t.Error("the grabs-per-second chart has no won line above zero")
	}
	b.Screenshot("dashboard")

	b.Do(chromedp.Click(chromedp.ID("reconcile")))
	b.WaitFor(`document.getElementById("reconcile-result").textContent.startsWith("In agreement")`, 10*time.Second, "reconcile")

	if got := b.Text("t-queue"); got != "0" {
		t.Errorf("queue depth after draining = %q", got)
	}
}

// TestPayingAtTheProvider: with a payment provider, the pay button sends the buyer to its
// checkout page (told which payment), the provider's signed callback pays the order, and the
// buyer, sent back, finds it paid.
func TestPayingAtTheProvider(t *testing.T) {
	secret := []byte("the provider's callback secret")
	var back atomic.Pointer[string] // the activity page, once the site is up
	api := ""                       // the site, once it is up
	var callbacks atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/checkout" || q.Get("payment_id") == "" || q.Get("order_token") == "" || q.Get("amount_cents") != "99900" {
			http.Error(w, "not a checkout", http.StatusBadRequest)
			return
		}
		body := fmt.Sprintf(`{"order_token":%q,"payment_id":%q,"amount_cents":99900,"status":"succeeded"}`, q.Get("order_token"), q.Get("payment_id"))
		req, _ := http.NewRequest("POST", api+"/api/payments/callback", strings.NewReader(body))
		req.Header.Set(signature.Header, signature.Sign(secret, time.Now(), []byte(body)))
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Errorf("callback: %v", err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("callback answered %s", resp.Status)
			}
			callbacks.Add(1)
		}
		http.Redirect(w, r, *back.Load(), http.StatusSeeOther)
	}))
	t.Cleanup(provider.Close)
	s := newSiteWith(t, func(c *node.Config) {
		c.Payments = node.Payments{Providers: []string{signature.ProviderName}, Secret: string(secret), CheckoutURL: provider.URL + "/checkout"}
	}, nil)
	api = s.url
	a := s.create(sale.Activity{Name: "Phone X", Kind: sale.KindItem, Stock: 5, PriceCents: 99_900}, -time.Second)
	page := s.url + "/activity/" + a.ID
	back.Store(&page)

	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(page))
	signIn(b, "alice")
	b.WaitFor(`!document.getElementById("grab").disabled`, 15*time.Second, "the button open")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second, "the order created")
	b.Do(chromedp.Click(chromedp.ID("pay")))
	// To the provider, which calls back and sends the buyer back to the page.
	for deadline := time.Now().Add(20 * time.Second); callbacks.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pay button never took the buyer to the provider")
		}
	}
	b.Do(chromedp.WaitVisible(chromedp.ID("order")))
	b.WaitFor(`document.getElementById("order-status").textContent === "Paid"`, 20*time.Second,
		"the order paid by the provider's callback, back on the page")
	if n := callbacks.Load(); n != 1 {
		t.Errorf("the provider was visited %d times, want once", n)
	}
	st, err := s.env.Service.Stats(context.Background(), a.ID)
	if err != nil || st.Paid != 1 {
		t.Errorf("stats %+v, %v; want 1 paid", st, err)
	}
	b.Screenshot("product-paid-at-provider")
}

// TestChoosingAProviderAndScanning: with Alipay and WeChat Pay the product page offers both; on
// a desktop WeChat Pay's payment is a QR code the page shows (Native), and the page follows the
// order to Paid when WeChat Pay's notice comes.
func TestChoosingAProviderAndScanning(t *testing.T) {
	dir := t.TempDir()
	appKey, providerKey, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	gw := paytest.StartAlipay("2021000000000001", &paytest.Key(0).PublicKey, paytest.Key(1))
	t.Cleanup(gw.Close)
	const apiV3Key = "0123456789abcdef0123456789abcdef"
	wx := paytest.StartWeChatPay("1900000109", "wxd678efh567hg6787", "MERCHANT-SERIAL", &paytest.Key(0).PublicKey,
		"PUB_KEY_ID_0001", paytest.Key(1), []byte(apiV3Key))
	t.Cleanup(wx.Close)
	s := newSiteWith(t, func(c *node.Config) {
		c.Payments = node.Payments{Providers: []string{"alipay", "wechatpay"}, PublicURL: "https://shop.example",
			Alipay: node.Alipay{AppID: gw.AppID, PrivateKey: appKey, PublicKey: providerKey, Gateway: gw.URL()},
			WeChatPay: node.WeChatPay{MchID: wx.MchID, AppID: wx.AppID, Serial: "MERCHANT-SERIAL", PrivateKey: appKey,
				PlatformKey: providerKey, PlatformSerial: "PUB_KEY_ID_0001", APIv3Key: apiV3Key, APIURL: wx.URL()}}
	}, nil)
	a := s.create(sale.Activity{Name: "Phone X", Kind: sale.KindItem, Stock: 5, PriceCents: 99_900}, -time.Second)
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	b.WaitFor(`!document.getElementById("grab").disabled`, 15*time.Second, "the button open")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second, "the order created")
	b.WaitFor(`!document.getElementById("provider-choice").hidden &&
		Array.from(document.getElementById("provider").options, (o) => o.value).join() === "alipay,wechatpay"`,
		10*time.Second, "both providers offered, Alipay first")
	b.Do(chromedp.SetValue(chromedp.ID("provider"), "wechatpay"), chromedp.Click(chromedp.ID("pay")))
	b.WaitFor(`!document.getElementById("scan").hidden && document.getElementById("scan-code").naturalWidth >= 256`,
		15*time.Second, "WeChat Pay's QR code shown")
	ps, err := s.env.Payments.List(context.Background(), sale.PaymentFilter{State: sale.PaymentStarted, Limit: 10})
	if err != nil || len(ps) != 1 || ps[0].Provider != "wechatpay" {
		t.Fatalf("payments started: %+v, %v; want one at wechatpay", ps, err)
	}
	b.Screenshot("product-scan-to-pay")
	h, body := wx.Notice(nil, time.Now(), "EV-1", "TRANSACTION.SUCCESS", wx.Paid(ps[0].ID, ps[0].AmountCents))
	if status, answer, err := paytest.Post(s.url+"/api/payments/wechatpay", "application/json", h, body); err != nil || status != http.StatusNoContent {
		t.Fatalf("WeChat Pay's notice: %d %q, %v", status, answer, err)
	}
	b.WaitFor(`document.getElementById("order-status").textContent === "Paid" && document.getElementById("scan").hidden`,
		15*time.Second, "the order paid, followed by the page")
}

// TestDashboardOperatorControls: from the dashboard an operator adds stock to a sold-out item,
// exports its orders, looks up a user's orders, replays a dead letter and a parked event, marks
// a late payment refunded, and ends the sale; each reaches the service.
func TestDashboardOperatorControls(t *testing.T) {
	ctx := context.Background()
	// Refunds are a payment provider's: the node has one.
	s := newSiteWith(t, func(c *node.Config) {
		c.Payments = node.Payments{Providers: []string{signature.ProviderName}, Secret: "a provider's secret, 32 bytes ok",
			CheckoutURL: "https://pay.example.com/checkout"}
		c.Webhooks, c.WebhookSecret = []string{"http://127.0.0.1:9/events"}, "a receiver's secret, 32 bytes ok" // an outbox (its relay not started)
	}, nil)
	svc := s.env.Service
	a := s.create(sale.Activity{Name: "Console", Kind: sale.KindItem, Stock: 2, PriceCents: 49_900}, -time.Second)
	for _, u := range []string{"alice", "bob"} {
		if code := s.grab(a.ID, u); code != http.StatusAccepted {
			t.Fatalf("grab of %s: %d", u, code)
		}
	}
	s.env.Drain(a.ID)
	// bob's payment comes after his order was cancelled: a refund to make.
	bobs, err := s.env.Operator.Orders(ctx, sale.OrderFilter{UserID: "bob", Limit: 1})
	if err != nil || len(bobs) != 1 {
		t.Fatalf("bob's order: %v, %v", bobs, err)
	}
	p, _, err := s.env.Payments.Start(ctx, "bob", bobs[0].Token, sale.Checkout{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, "bob", bobs[0].Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.Payments.Settle(ctx, sale.PaymentNotice{Provider: signature.ProviderName, PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: p.AmountCents,
		Outcome: sale.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	// A grab the workers gave up on, and an event a receiver kept refusing.
	dead := sale.Grab{Token: sale.NewGrabToken(s.env.Clock.Now()), ActivityID: a.ID, UserID: "carol", AmountCents: 49_900, At: s.env.Clock.Now()}
	if err := s.env.Store.DeadLetter(ctx, dead, 5, "the database refused it", s.env.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	ds, err := s.env.Store.Deliveries(ctx, sale.DeliveryFilter{Limit: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v, %v", ds, err)
	}
	if err := s.env.Store.Failed(ctx, ds[0].Sink, ds[0].ID, "503 from the receiver", s.env.Clock.Now(), true); err != nil {
		t.Fatal(err)
	}

	b := browsertest.New(t, 1280, 1400)
	openDashboard(b, s)
	b.WaitFor(`document.querySelectorAll("#dead tbody button").length === 1 && document.querySelectorAll("#parked tbody button").length === 1 &&
		document.querySelectorAll("#refunds tbody button").length === 1 &&
		document.querySelector("#refunds tbody td:nth-child(2)").textContent === "signed"`, 10*time.Second,
		"the dead letter, the parked event and the refund listed, with its provider (the signed one: an operator refunds it)")
	b.Screenshot("dashboard-support")
	b.Do(setValue("pick", a.ID), chromedp.Evaluate[chromedp.Void](`document.getElementById("pick").dispatchEvent(new Event("change"))`))
	b.WaitFor(`document.getElementById("t-stock").textContent === "2"`, 10*time.Second, "the live view")

	b.Do(setValue("s-add", "3"), submit("stock"))
	b.WaitFor(`document.getElementById("operate-result").textContent.startsWith("Added 3: stock 5")`, 10*time.Second, "3 units added")
	b.WaitFor(`document.getElementById("t-stock").textContent === "5" && document.getElementById("t-remaining").textContent === "4"`,
		10*time.Second, "the live view of 5 units, 4 left")
	if got, err := svc.Remaining(ctx, a.ID); err != nil || got != 4 {
		t.Errorf("after 3 added to a stock of 2 (alice's held, bob's back): %d remaining, %v; want 4", got, err)
	}
	b.Do(chromedp.Click(chromedp.ID("export")))
	b.WaitFor(`document.getElementById("operate-result").textContent === "Exported 2 orders."`, 10*time.Second, "the export")

	b.Do(setValue("u-user", "alice"), submit("lookup"))
	b.WaitFor(`document.getElementById("lookup-result").textContent === "1 order of alice."`, 10*time.Second, "alice's orders")

	b.Do(chromedp.Click(chromedp.CSS("#dead tbody button")))
	b.WaitFor(`document.getElementById("support-result").textContent.startsWith("Replayed ")`, 10*time.Second, "the dead letter replayed")
	// The result shows once the desk is reloaded: the replayed letter has left its table.
	b.WaitFor(`document.querySelectorAll("#dead tbody button").length === 0`, 5*time.Second, "the dead letter gone from the desk")
	if o, err := svc.Order(ctx, "carol", dead.Token); err != nil || o.Status != sale.StatusCreated {
		t.Errorf("carol's replayed grab: %+v, %v", o, err)
	}
	b.Do(chromedp.Click(chromedp.CSS("#parked tbody button")))
	b.WaitFor(`document.getElementById("support-result").textContent.includes("is due again")`, 10*time.Second, "the event replayed")
	b.WaitFor(`document.querySelectorAll("#parked tbody button").length === 0`, 5*time.Second, "the event gone from the parked list")
	b.Do(chromedp.Click(chromedp.CSS("#refunds tbody button")))
	b.WaitFor(`document.getElementById("support-result").textContent.endsWith("order REFUNDED.")`, 10*time.Second, "the refund marked")
	b.WaitFor(`document.querySelectorAll("#dead tbody button, #parked tbody button, #refunds tbody button").length === 0`,
		10*time.Second, "nothing left to do")

	b.Do(chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.ID("end")))
	b.WaitFor(`document.getElementById("operate-result").textContent.startsWith("Ended")`, 10*time.Second, "the sale ended")
	if code := s.grab(a.ID, "dave"); code != http.StatusForbidden {
		t.Errorf("a grab after the end from the dashboard: %d, want 403", code)
	}
	if got, ok := svc.Known(a.ID); !ok || got.Stock != 5 || got.Revision != 3 {
		t.Errorf("after the end: %+v; want revision 3 of 5 units", got)
	}
	// carol's dead letter was written by the test, not granted by the gate: the gate's 4 units
	// are the 5 less alice's.
	if rem, err := svc.Remaining(ctx, a.ID); err != nil || rem != 4 {
		t.Errorf("after the end: %d remaining, %v; want 4", rem, err)
	}
	b.Screenshot("dashboard-operated")
}

// openDashboard opens the site's dashboard in b and signs in with the admin token.
func openDashboard(b *browsertest.Browser, s *site) {
	b.Do(chromedp.Navigate(s.url + "/admin"))
	b.Do(chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), admin), submit("auth"))
	b.WaitFor(`!document.getElementById("desk").hidden`, 10*time.Second, "the dashboard")
}
