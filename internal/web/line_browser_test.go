package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/browsertest"
	"seckill/internal/sale"
)

// join joins a's line through the API as user.
func (s *site) join(a sale.Activity, user string) {
	s.t.Helper()
	if code := s.grab(a.ID, user); code != http.StatusAccepted {
		s.t.Fatalf("%s joins %s: %d", user, a.ID, code)
	}
}

// drain runs a drainer on the site's service until the test ends.
func (s *site) drain() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.env.Lines.NewDrainer("page", 100*time.Millisecond).Run(ctx, func(id string, err error) {
			s.t.Errorf("drain %s: %v", id, err)
		})
	}()
	s.t.Cleanup(func() { cancel(); <-done })
}

// TestWaitingLineOnThePage: a queue sale's page takes a ticket before the start ("Join the
// line"), says the early crowd is shuffled at the start, then shows the ticket's place once the
// line is drawn, and finally what the line answered, as the server has it: a win followed to the
// order, or sold out.
func TestWaitingLineOnThePage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Console", Kind: sale.KindItem, Stock: 1, PriceCents: 49_900,
		Admission: sale.AdmitQueue, AdmitRate: 1}, 10*time.Second) // time to start a browser on a loaded machine before the start
	s.join(a, "bob")
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	if got := b.Text("grab"); got != "Join the line" || browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) {
		t.Fatalf("button of a queue sale before the start: %q", got)
	}
	if note := b.Text("fairness"); !strings.Contains(note, "shuffled at the start") || !strings.Contains(note, a.Seed.Commitment()[:16]) {
		t.Errorf("fairness note %q: want the shuffle explained and the draw's commitment", note)
	}
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`!document.getElementById("line").hidden && document.getElementById("line-status").textContent === "In line"`,
		10*time.Second, "alice's ticket")
	if got := b.Text("line-position"); got != "Shuffled at the start" {
		t.Errorf("position of an early ticket: %q", got)
	}
	if got := b.Text("grab"); got != "You are in line" {
		t.Errorf("button with a ticket: %q", got)
	}
	b.Screenshot("line-early")

	// After the start a late joiner seals the line: the early crowd is drawn, and alice's page
	// shows her place among the three.
	for time.Now().Add(skew).Before(a.StartAt) {
		time.Sleep(50 * time.Millisecond)
	}
	s.join(a, "carol")
	b.WaitFor(`/^#[12] of 3$/.test(document.getElementById("line-position").textContent)`, 10*time.Second,
		"alice's place after the draw")
	b.Screenshot("line-position")
	// A reload finds the ticket again.
	b.Do(chromedp.Reload())
	b.WaitFor(`/^#[12] of 3$/.test(document.getElementById("line-position").textContent)`, 10*time.Second,
		"alice's place after a reload")

	s.drain()
	b.WaitFor(`["Your turn: you won", "Sold out before your turn"].includes(document.getElementById("line-status").textContent)`,
		15*time.Second, "the line's answer")
	tok := browsertest.Eval[string](b, `localStorage.getItem("seckill.ticket.`+a.ID+`.alice")`)
	v, err := s.env.Lines.Ticket(context.Background(), "alice", tok)
	if err != nil {
		t.Fatal(err)
	}
	switch v.Outcome {
	case sale.OutcomeWon:
		b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second,
			"the won ticket's order")
	case sale.OutcomeSoldOut:
		if got := status(b); got != "Sold out before your turn came." {
			t.Errorf("status = %q", got)
		}
	default:
		t.Fatalf("alice's ticket: %+v", v)
	}
	b.Screenshot("line-answered")
}

// TestLotteryOnThePage: a lottery's page takes an entry before the start, tells the user the
// draw is at the start, and after it shows the outcome the server has and the revealed seed.
func TestLotteryOnThePage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Sneakers", Kind: sale.KindItem, Stock: 1, PriceCents: 19_900,
		Admission: sale.AdmitLottery}, 10*time.Second) // time to start a browser on a loaded machine before the start
	s.join(a, "bob")
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	if got := b.Text("grab"); got != "Enter the draw" {
		t.Fatalf("button of a lottery before the start: %q", got)
	}
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("line-title").textContent === "Your entry" && document.getElementById("line-position").textContent === "Drawn at the start"`,
		10*time.Second, "alice's entry")
	s.drain()
	b.WaitFor(`["Drawn: you won", "Not drawn"].includes(document.getElementById("line-status").textContent)`,
		30*time.Second, "the draw's answer")
	tok := browsertest.Eval[string](b, `localStorage.getItem("seckill.ticket.`+a.ID+`.alice")`)
	v, err := s.env.Lines.Ticket(context.Background(), "alice", tok)
	if err != nil {
		t.Fatal(err)
	}
	want := map[sale.Outcome]string{sale.OutcomeWon: "Drawn: you won", sale.OutcomeNotDrawn: "Not drawn"}[v.Outcome]
	if got := b.Text("line-status"); got != want {
		t.Errorf("the page says %q; the server's outcome is %s", got, v.Outcome)
	}
	b.WaitFor(`document.getElementById("fairness").textContent.includes("seed revealed: `+a.Seed.String()[:16]+`")`,
		10*time.Second, "the revealed seed")
	if v.Outcome == sale.OutcomeNotDrawn && b.Text("grab") != "Not drawn" {
		t.Errorf("button after not being drawn: %q", b.Text("grab"))
	}
}

// TestDashboardLine: the dashboard's form creates a queue sale (refusing an admission rate of
// 0 first), and the live view shows its line: the tickets taken and, once drained, none waiting.
func TestDashboardLine(t *testing.T) {
	s := newSite(t)
	b := browsertest.New(t, 1280, 1000)
	openDashboard(b, s)
	// The server's clock runs an hour ahead of the browser's: the sale starts in 3 s on it.
	b.Do(chromedp.SendKeys(chromedp.ID("c-name"), "Queue day"),
		chromedp.SendKeys(chromedp.ID("c-stock"), "5"),
		chromedp.SendKeys(chromedp.ID("c-money"), "9.90"),
		setValue("c-start", time.Now().Add(skew+3*time.Second).Format("2006-01-02T15:04:05")),
		setValue("c-end", time.Now().Add(skew+time.Hour).Format("2006-01-02T15:04:05")),
		setValue("c-admission", "queue"), setValue("c-cap", "40"), setValue("c-rate", "0"),
		submit("create"))
	b.WaitFor(`document.getElementById("e-rate").textContent.startsWith("A whole number")`, 5*time.Second,
		"an admission rate of 0 refused")
	b.Do(setValue("c-rate", "50"), submit("create"))
	b.WaitFor(`document.getElementById("create-result").textContent.startsWith("Created ")`, 10*time.Second, "the sale created")
	acts := s.env.Service.Current()
	if len(acts) != 1 || acts[0].Admission != sale.AdmitQueue || acts[0].QueueCap != 40 || acts[0].AdmitRate != 50 {
		t.Fatalf("created %+v", acts)
	}
	a := acts[0]
	b.WaitFor(`!document.getElementById("line-tiles").hidden`, 10*time.Second, "the line's tiles")
	for i := range 12 {
		s.join(a, fmt.Sprint("u", i))
	}
	b.WaitFor(`document.getElementById("t-joined").textContent === "12" && document.getElementById("t-waiting").textContent === "12"`,
		10*time.Second, "twelve tickets waiting")
	s.drain()
	b.WaitFor(`document.getElementById("t-waiting").textContent === "0"`, 15*time.Second, "the line answered")
	b.Screenshot("dashboard-line")
}

// TestChallengeBeforeTheLineOnThePage: a waiting line that asks for a challenge shows it when the
// user joins before the start, and the right answer joins the line.
func TestChallengeBeforeTheLineOnThePage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Guarded line", Kind: sale.KindItem, Stock: 3, PriceCents: 100,
		Admission: sale.AdmitQueue, RequireChallenge: true}, time.Hour)
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	b.WaitFor(`document.getElementById("grab").textContent === "Join the line" && !document.getElementById("grab").disabled`,
		10*time.Second, "the button open an hour before the start")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`!document.getElementById("challenge").hidden`, 10*time.Second, "the challenge")
	id := browsertest.Eval[string](b, `document.getElementById("challenge").dataset.challenge`)
	b.Do(chromedp.SendKeys(chromedp.ID("answer"), fmt.Sprint(s.env.Answers.Of(t, id))), submit("challenge"))
	b.WaitFor(`document.getElementById("line-status").textContent === "In line" && document.getElementById("line-position").textContent === "Shuffled at the start"`,
		10*time.Second, "alice in the early crowd")
	if st, err := s.env.Service.Stats(context.Background(), a.ID); err != nil || st.Line.Joined != 1 {
		t.Errorf("stats %+v, %v; want one ticket", st.Line, err)
	}
}

// openWaves gives the gate the waves of the site's reservation sales as they start, as the
// binary's lease holder does, until the test ends.
func (s *site) openWaves() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := s.env.Reservations.OpenDue(ctx); err != nil && ctx.Err() == nil {
				s.t.Errorf("open the waves: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	s.t.Cleanup(func() { cancel(); <-done })
}

// TestReservationOnThePage: a reservation sale's page reserves before the start ("Reserve"),
// shows the buyer's number, then after the start their wave and a countdown to it with the
// button shut, and grabs once the wave opens; a buyer who did not reserve is told so.
func TestReservationOnThePage(t *testing.T) {
	s := newSite(t)
	a := s.create(sale.Activity{Name: "Phone launch", Kind: sale.KindItem, Stock: 5, PriceCents: 599_900,
		Admission: sale.AdmitReservation, Waves: 2, WaveInterval: 6 * time.Second}, 10*time.Second)
	if _, _, err := s.env.Reservations.Reserve(context.Background(), a.ID, "bob"); err != nil {
		t.Fatal(err) // number 1: wave 1 of two reservers in two waves
	}
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(s.url + "/activity/" + a.ID))
	signIn(b, "alice")
	if got := b.Text("grab"); got != "Reserve" {
		t.Fatalf("button of a reservation sale before the start: %q", got)
	}
	if note := b.Text("fairness"); !strings.Contains(note, "only those who reserved may buy") {
		t.Errorf("fairness note %q: want the reservation explained", note)
	}
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("grab").textContent === "Reserved, #2" && document.getElementById("reservation-number").textContent === "#2"`,
		10*time.Second, "alice's reservation")
	if got := b.Text("reservation-wave"); got != "Assigned at the start" {
		t.Errorf("wave before the start: %q", got)
	}
	b.Screenshot("reservation-reserved")

	s.openWaves()
	b.WaitFor(`document.getElementById("reservation-wave").textContent === "2" && /^Wave 2 opens in/.test(document.getElementById("grab").textContent)`,
		20*time.Second, "alice's wave after the start")
	if !browsertest.Eval[bool](b, `document.getElementById("grab").disabled`) || b.Text("clock-label") != "Your wave opens in" {
		t.Errorf("before her wave: the button %q (disabled %v), the clock %q", b.Text("grab"),
			browsertest.Eval[bool](b, `document.getElementById("grab").disabled`), b.Text("clock-label"))
	}
	b.Screenshot("reservation-wave")
	if code := s.grab(a.ID, "carol"); code != http.StatusForbidden {
		t.Errorf("a stranger's grab: %d; want 403", code)
	}
	b.WaitFor(`document.getElementById("grab").textContent === "Grab" && !document.getElementById("grab").disabled`,
		15*time.Second, "the grab open in alice's wave")
	b.Do(chromedp.Click(chromedp.ID("grab")))
	b.WaitFor(`document.getElementById("order-status").textContent.startsWith("Created")`, 15*time.Second, "alice's order")
	b.Screenshot("reservation-won")
}

// TestDashboardReservation: the dashboard creates a reservation sale (its waves checked before
// it is sent), and shows its reservers and, once the waves open, each wave's progress.
func TestDashboardReservation(t *testing.T) {
	s := newSite(t)
	b := browsertest.New(t, 1280, 1100)
	openDashboard(b, s)
	// The server's clock runs ahead of the browser's by skew: the sale starts in 4 s on it.
	b.Do(chromedp.SendKeys(chromedp.ID("c-name"), "Launch day"),
		chromedp.SendKeys(chromedp.ID("c-stock"), "5"),
		chromedp.SendKeys(chromedp.ID("c-money"), "59.90"),
		setValue("c-start", time.Now().Add(skew+4*time.Second).Format("2006-01-02T15:04:05")),
		setValue("c-end", time.Now().Add(skew+time.Hour).Format("2006-01-02T15:04:05")),
		setValue("c-admission", "reservation"), setValue("c-waves", "2"), submit("create"))
	b.WaitFor(`document.getElementById("e-interval").textContent.startsWith("Seconds")`, 5*time.Second,
		"two waves without an interval refused")
	b.Do(setValue("c-interval", "60"), setValue("c-order", "random"), submit("create"))
	b.WaitFor(`document.getElementById("create-result").textContent.startsWith("Created ")`, 10*time.Second, "the sale created")
	acts := s.env.Service.Current()
	if len(acts) != 1 || acts[0].Admission != sale.AdmitReservation || acts[0].Waves != 2 ||
		acts[0].WaveInterval != time.Minute || acts[0].WaveOrder != sale.WaveDrawn {
		t.Fatalf("created %+v", acts)
	}
	a := acts[0]
	for i := range 4 {
		if _, _, err := s.env.Reservations.Reserve(context.Background(), a.ID, fmt.Sprint("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	b.WaitFor(`!document.getElementById("reservation-tiles").hidden && document.getElementById("t-reserved").textContent === "4"`,
		15*time.Second, "four reserved")
	// The forecast of four reservers on the prior: 3 buyers (3.2), 10 clicks (9.6), a peak of
	// 9.6 × 2/4 × 0.35 = 1.7 a second; and the fleet for it.
	b.WaitFor(`!document.getElementById("forecast-tiles").hidden &&
		document.getElementById("t-forecast").textContent === "3 buyers · 10 clicks · peak 1.7/s" &&
		document.getElementById("t-basis").textContent.startsWith("the prior") &&
		/^\d+ API nodes · \d+ workers · 1 Redis master/.test(document.getElementById("t-plan").textContent)`,
		20*time.Second, "the forecast and the fleet for it")
	s.openWaves()
	b.WaitFor(`document.getElementById("t-waves").textContent === "wave 1: 0 / 0 / 2 · wave 2: 0 / 0 / 2"`,
		20*time.Second, "the waves assigned at the start")
	b.Screenshot("dashboard-reservation")
}
