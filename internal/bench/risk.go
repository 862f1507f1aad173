package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi/wire"
)

// A risk crowd is the traffic the risk model is trained and evaluated on: people on the real
// product page in Chromium (humans.go), and bots on the API, each of a profile the design
// documents name: a script clicking at a machine's cadence, a farm of accounts behind one
// address, headless clients that send no pointer movement, and replays of one captured set of
// signals. Every parameter of the profiles is drawn from the seed, so that another seed draws
// another crowd: a model trained on one is measured on another it was not tuned on.

// The bot profiles.
const (
	ProfileScripted = "scripted" // one account, many clicks at a steady beat, no signals
	ProfileFarm     = "farm"     // many accounts behind one address, a click each
	ProfileHeadless = "headless" // a headless client: signals without movement, a shared fingerprint
	ProfileReplay   = "replay"   // one person's captured signals, sent again by many accounts
	ProfileHuman    = "human"    // a person on the page, moving the pointer
	ProfileKeyboard = "keyboard" // a person on the page who clicks with the keyboard
)

// RiskParams are a crowd's parameters, drawn from its seed.
type RiskParams struct {
	Seed uint64 `json:"seed"`
	// The bots: the share of each profile (scripted, farm, headless, replay), the scripted
	// beat and its clicks, the farm's accounts per address, the headless clients' time from
	// the load to the click, and the share of bot addresses in the datacenter list.
	Mix             [4]float64 `json:"mix"`
	CadenceMs       float64    `json:"cadence_ms"`
	CadenceJitter   float64    `json:"cadence_jitter"`
	ScriptedClicks  int        `json:"scripted_clicks"`
	FarmSize        int        `json:"farm_size"`
	HeadlessClickMs [2]int     `json:"headless_click_ms"`
	DatacenterShare float64    `json:"datacenter_share"`
	// The people: the share clicking with the keyboard, the share behind a shared address
	// (an office, a carrier's NAT) and how long they look before they move.
	KeyboardShare float64 `json:"keyboard_share"`
	NATShare      float64 `json:"nat_share"`
	ThinkMs       [2]int  `json:"think_ms"`
}

// DrawRiskParams draws a crowd's parameters from seed.
func DrawRiskParams(seed uint64) RiskParams {
	r := rand.New(rand.NewPCG(seed, 0x715c))
	p := RiskParams{Seed: seed,
		CadenceMs: between(r, 120, 450), CadenceJitter: between(r, 0, 0.03), ScriptedClicks: 4 + r.IntN(7),
		FarmSize: 8 + r.IntN(33), DatacenterShare: between(r, 0.2, 0.7),
		KeyboardShare: between(r, 0.01, 0.04), NATShare: between(r, 0.05, 0.2)}
	lo := 40 + r.IntN(400)
	p.HeadlessClickMs = [2]int{lo, lo + 100 + r.IntN(900)}
	think := 300 + r.IntN(1200)
	p.ThinkMs = [2]int{think, think + 800 + r.IntN(2500)}
	var sum float64
	for i := range p.Mix {
		p.Mix[i] = between(r, 0.5, 1.5)
		sum += p.Mix[i]
	}
	for i := range p.Mix {
		p.Mix[i] /= sum
	}
	return p
}

// RiskCrowd runs a risk crowd against a server.
type RiskCrowd struct {
	Base       string
	AdminToken string
	Secret     string // the server's JWT secret, to mint the accounts' tokens
	Params     RiskParams
	Humans     int // accounts of people, on the page
	Bots       int // accounts of bots, on the API
	Chromium   string
	Tabs       int // pages open at once; 4 if zero
	// Datacenter are the networks the server lists (SECKILL_RISK_NETWORKS); the datacenter
	// share of the bots come from them. Every other address is drawn from 100.64.0.0/10.
	Datacenter []netip.Prefix
}

// RiskReport is what a crowd did.
type RiskReport struct {
	Params   RiskParams     `json:"params"`
	Accounts map[string]int `json:"accounts"` // by profile
	Grabs    map[string]int `json:"grabs"`    // requests sent, by profile
	// Answers counts the statuses the grabs got, by profile.
	Answers map[string]map[int]int `json:"answers"`
	// PagesFailed are the people whose page never clicked (an error of the page or the browser).
	PagesFailed int `json:"pages_failed"`
	// PageError is the first of those pages' errors ("" when none failed).
	PageError string `json:"page_error,omitempty"`
	// Bots are the bots' accounts, for labelling the node's recording.
	Bots []string `json:"-"`
}

// account is one client of the crowd.
type account struct {
	user, profile, addr string
	signals             *wire.Signals // nil: the grab has no body
	clicks              int
	beat                time.Duration
	jitter              float64
	at                  time.Duration // when its first click is sent, from the start
}

// Run creates the activity, sends the crowd at it over about span (the people's pages take
// their own time), and reports. It returns once every client is done.
func (c RiskCrowd) Run(ctx context.Context, span time.Duration) (RiskReport, error) {
	p := c.Params
	rep := RiskReport{Params: p, Accounts: map[string]int{}, Grabs: map[string]int{}, Answers: map[string]map[int]int{}}
	tokens, err := auth.New([]byte(c.Secret), time.Now)
	if err != nil {
		return rep, err
	}
	client, err := NewClient([]string{c.Base}, c.AdminToken, 64)
	if err != nil {
		return rep, err
	}
	defer client.Close()
	stock := int64(c.Humans + c.Bots + 10)
	now := time.Now().UTC()
	id, err := client.CreateActivity(ctx, wire.CreateActivityRequest{Name: fmt.Sprintf("Risk crowd %d", p.Seed), Kind: "item", Stock: &stock,
		PriceCents: 100, PerUserLimit: new(int64(1)), StartAt: now.Add(-time.Second).Format(time.RFC3339Nano),
		EndAt: now.Add(2 * time.Hour).Format(time.RFC3339Nano), PayWindowS: new(int64(600))})
	if err != nil {
		return rep, err
	}
	r := rand.New(rand.NewPCG(p.Seed, 0xb075))
	bots := c.bots(r, span)
	var mu sync.Mutex
	count := func(profile string, status int) {
		mu.Lock()
		defer mu.Unlock()
		rep.Grabs[profile]++
		if rep.Answers[profile] == nil {
			rep.Answers[profile] = map[int]int{}
		}
		rep.Answers[profile][status]++
	}
	for _, b := range bots {
		rep.Accounts[b.profile]++
		rep.Bots = append(rep.Bots, b.user)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	start := time.Now()
	for _, b := range bots {
		wg.Go(func() {
			tok, err := tokens.Mint(b.user, time.Now(), 2*time.Hour)
			if err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(b.at))):
			}
			for i := range b.clicks {
				if i > 0 {
					d := time.Duration(float64(b.beat) * (1 + b.jitter*r2(b.user, i)))
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				count(b.profile, grabAs(ctx, hc, c.Base, id, tok, b.addr, b.signals))
			}
		})
	}
	people, err := c.people(r)
	if err != nil {
		wg.Wait()
		return rep, err
	}
	for _, h := range people {
		rep.Accounts[h.profile]++
	}
	failed, first, err := runPeople(ctx, c, id, tokens, people, count)
	rep.PagesFailed = failed
	if first != nil {
		rep.PageError = first.Error()
	}
	wg.Wait()
	sort.Strings(rep.Bots)
	return rep, err
}

// r2 is a deterministic draw in [-1, 1) for a user's i-th click, so that clients running at
// once need not share a source.
func r2(user string, i int) float64 {
	return rand.New(rand.NewPCG(hashOf(user), uint64(i))).Float64()*2 - 1
}

// bots draws the bots' accounts.
func (c RiskCrowd) bots(r *rand.Rand, span time.Duration) []account {
	p := c.Params
	addr := func() string {
		if len(c.Datacenter) > 0 && r.Float64() < p.DatacenterShare {
			return drawAddr(r, c.Datacenter[r.IntN(len(c.Datacenter))])
		}
		return drawAddr(r, netip.MustParsePrefix("100.64.0.0/10"))
	}
	headlessPrints := []string{randomHex(r, 16), randomHex(r, 16)} // the headless browsers' few fingerprints
	replayed := &wire.Signals{Moves: 30 + r.IntN(200), PathPx: math.Round(between(r, 600, 4000)*10) / 10,
		DirectionEntropy: math.Round(between(r, 1.2, 2.8)*1000) / 1000, SpeedCV: math.Round(between(r, 0.4, 1.4)*1000) / 1000,
		LoadToClickMs: int64(2000 + r.IntN(6000)), Fingerprint: randomHex(r, 16)}
	var out []account
	var farmAddr string
	farmLeft := 0
	for i := range c.Bots {
		a := account{user: fmt.Sprintf("bot%d-%d", p.Seed, i), clicks: 1, at: time.Duration(r.Float64() * float64(span))}
		switch x := r.Float64(); {
		case x < p.Mix[0]:
			a.profile, a.addr, a.clicks = ProfileScripted, addr(), p.ScriptedClicks
			a.beat, a.jitter = time.Duration(p.CadenceMs*float64(time.Millisecond)), p.CadenceJitter
		case x < p.Mix[0]+p.Mix[1]:
			if farmLeft == 0 {
				farmAddr, farmLeft = addr(), p.FarmSize
			}
			farmLeft--
			a.profile, a.addr = ProfileFarm, farmAddr
		case x < p.Mix[0]+p.Mix[1]+p.Mix[2]:
			a.profile, a.addr = ProfileHeadless, addr()
			a.signals = &wire.Signals{ // no movement at all
				LoadToClickMs: int64(p.HeadlessClickMs[0] + r.IntN(p.HeadlessClickMs[1]-p.HeadlessClickMs[0]+1)),
				Fingerprint:   headlessPrints[r.IntN(len(headlessPrints))]}
		default:
			a.profile, a.addr, a.signals = ProfileReplay, addr(), replayed
		}
		out = append(out, a)
	}
	return out
}

func between(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// drawAddr draws an address of p.
func drawAddr(r *rand.Rand, p netip.Prefix) string {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := range 8 {
			if i*8+j >= bits && r.IntN(2) == 1 {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a.String()
}

func randomHex(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for range n {
		b.WriteByte(digits[r.IntN(16)])
	}
	return b.String()
}

// grabAs sends a grab as the client at addr (X-Forwarded-For, which the server believes of
// loopback), with signals as its body when there are any, and returns the status (0: no answer).
func grabAs(ctx context.Context, hc *http.Client, base, activity, token, addr string, signals *wire.Signals) int {
	var body io.Reader = http.NoBody
	if signals != nil {
		b, _ := json.Marshal(wire.GrabBody{Signals: signals})
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/activities/"+url.PathEscape(activity)+"/grab", body)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", addr)
	if signals != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// person is one person of the crowd, on the page.
type person struct {
	user, profile, addr string
	look                browserLook
	think               time.Duration
}

// people draws the people's accounts.
func (c RiskCrowd) people(r *rand.Rand) ([]person, error) {
	if c.Humans > 0 && c.Chromium == "" {
		return nil, errors.New("risk crowd: the people need Chromium")
	}
	p := c.Params
	var out []person
	var natAddr string
	natLeft := 0
	for i := range c.Humans {
		h := person{user: fmt.Sprintf("person%d-%d", p.Seed, i), profile: ProfileHuman, look: drawLook(r),
			think: time.Duration(p.ThinkMs[0]+r.IntN(p.ThinkMs[1]-p.ThinkMs[0]+1)) * time.Millisecond}
		if r.Float64() < p.KeyboardShare {
			h.profile = ProfileKeyboard
		}
		switch {
		case natLeft > 0:
			h.addr, natLeft = natAddr, natLeft-1
		case r.Float64() < p.NATShare:
			natAddr, natLeft = drawAddr(r, netip.MustParsePrefix("100.64.0.0/10")), 1+r.IntN(4)
			h.addr = natAddr
		default:
			h.addr = drawAddr(r, netip.MustParsePrefix("100.64.0.0/10"))
		}
		out = append(out, h)
	}
	return out, nil
}
