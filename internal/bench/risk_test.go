package bench_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/bench"
	"seckill/internal/browsertest"
	"seckill/internal/httpapi/wire"
	"seckill/internal/node"
	"seckill/internal/risk"
	"seckill/internal/saletest"

	"seckill/internal/testtier"

	"seckill/internal/node/nodetest"
)

const (
	riskSecret = "0123456789abcdef0123456789abcdef"
	riskAdmin  = "admin-token-for-the-risk-crowd"
)

var datacenters = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}

// riskSite serves the node as the binary does (the API and the pages) on a real clock, with the
// risk rules and model of r over the datacenter list, believing the crowd's X-Forwarded-For from
// loopback.
func riskSite(t *testing.T, r node.Risk) (string, *node.Node) {
	t.Helper()
	nets := filepath.Join(t.TempDir(), "networks.txt")
	if err := os.WriteFile(nets, []byte(datacenters[0].String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Networks = nets
	_, n := nodetest.Served(t, saletest.RealClock(), func(c *node.Config) {
		c.API.JWTSecret, c.API.AdminToken, c.API.Risk = riskSecret, riskAdmin, r
		c.API.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		n.API.StopStreams()
		srv.Close()
	})
	return srv.URL, n
}

// crowdSet runs the crowd of seed against a recording site and returns the recording, labelled.
func crowdSet(t *testing.T, seed uint64, humans, bots int) (names []string, rows [][]float64, isBot []bool, rep bench.RiskReport) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "record.jsonl")
	base, n := riskSite(t, node.Risk{Record: path})
	crowd := bench.RiskCrowd{Base: base, AdminToken: riskAdmin, Secret: riskSecret, Params: bench.DrawRiskParams(seed),
		Humans: humans, Bots: bots, Chromium: browsertest.Chromium, Tabs: 2, Datacenter: datacenters}
	rep, err := crowd.Run(context.Background(), 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Risk.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := risk.ReadRecords(f)
	if err != nil {
		t.Fatal(err)
	}
	botSet := map[string]bool{}
	for _, u := range rep.Bots {
		botSet[u] = true
	}
	people := 0
	for _, r := range recs {
		if !botSet[r.User] {
			people++
		}
		isBot = append(isBot, botSet[r.User])
		row := make([]float64, risk.NumFeatures)
		for i, n := range risk.FeatureNames {
			row[i] = r.Features[n]
		}
		rows = append(rows, row)
	}
	// Every person's page clicked and its grab was judged; every bot's account sent its grabs.
	if people != humans-rep.PagesFailed || rep.PagesFailed > humans/10 {
		t.Fatalf("seed %d: %d grabs of people recorded, %d pages failed (the first: %s), of %d people",
			seed, people, rep.PagesFailed, rep.PageError, humans)
	}
	if got := len(recs) - people; got == 0 || got > rep.Grabs[bench.ProfileScripted]+rep.Grabs[bench.ProfileFarm]+
		rep.Grabs[bench.ProfileHeadless]+rep.Grabs[bench.ProfileReplay] {
		t.Fatalf("seed %d: %d grabs of bots recorded of %v sent", seed, got, rep.Grabs)
	}
	return risk.FeatureNames[:], rows, isBot, rep
}

// TestRiskModelFromTheCrowd is the risk model's whole path on real pages: a crowd of people on
// the product page in Chromium and bots of every profile on the API is recorded by the node,
// labelled and fitted; the model is measured on another crowd, drawn from another seed (other
// parameters, accounts and timing); then, on a node running it, a person on the page buys and
// a headless script clicking the same page's button is challenged (or blocked).
func TestRiskModelFromTheCrowd(t *testing.T) {
	testtier.NeedsServer(t, "a seckill node, its crowd and Chromium")
	names, rows, isBot, repA := crowdSet(t, 101, 6, 80)
	m, err := risk.Fit(names, rows, isBot, risk.FitOptions{Version: "crowd-101", Balanced: true})
	if err != nil {
		t.Fatal(err)
	}
	_, held, heldBot, repB := crowdSet(t, 202, 6, 80)
	if repA.Params == repB.Params {
		t.Fatal("the two crowds drew the same parameters")
	}
	e, err := risk.Evaluate(m, held, heldBot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held out (seed 202, %d grabs): precision %.3f recall %.3f humans challenged %.3f AUC %.3f",
		e.Samples, e.Precision, e.Recall, e.HumansChallenged, e.AUC)
	// Small crowds: the bounds are loose; the closing note's figures come from larger ones.
	if e.AUC < 0.9 || e.Recall < 0.8 {
		t.Fatalf("held out: %+v", e)
	}

	path := filepath.Join(t.TempDir(), "model.json")
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	base, _ := riskSite(t, node.Risk{Model: path})
	tokens, err := auth.New([]byte(riskSecret), time.Now) // mints what the node's tokens verify
	if err != nil {
		t.Fatal(err)
	}
	client, err := bench.NewClient([]string{base}, riskAdmin, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	stock := int64(10)
	now := time.Now().UTC()
	id, err := client.CreateActivity(context.Background(), wire.CreateActivityRequest{Name: "Guarded", Kind: "item", Stock: &stock, PriceCents: 100,
		PerUserLimit: new(int64(1)), StartAt: now.Add(-time.Second).Format(time.RFC3339Nano), EndAt: now.Add(time.Hour).Format(time.RFC3339Nano), PayWindowS: new(int64(600))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bench.NewBrowser(context.Background(), browsertest.Chromium)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tok := func(user string) string {
		s, err := tokens.Mint(user, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The page says "Queued" once the grab is answered, then the order's status once a poll
	// finds it placed: on a busy machine the page may be read after that poll.
	if said, err := b.Person(context.Background(), base, id, "shopper", tok("shopper"), 7); err != nil ||
		!strings.HasPrefix(said, "Queued") && said != "Your order is created: pay to keep it." {
		t.Fatalf("a person on the page: %q, %v; want the grab queued (or its order created)", said, err)
	}
	// The script is challenged, or blocked outright when the model is sure of it.
	said, err := b.Script(context.Background(), base, id, "scripter", tok("scripter"))
	if err != nil || said != "Please solve the challenge first." && said != "You cannot take part in this sale." {
		t.Fatalf("a headless script on the page: %q, %v; want it challenged or blocked", said, err)
	}
	t.Logf("the headless script on the page was told %q", said)
}
