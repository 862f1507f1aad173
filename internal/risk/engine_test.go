package risk

import (
	"context"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func human(fp string) *Page {
	return &Page{Moves: 140, PathPx: 2300, DirectionEntropy: 2.4, SpeedCV: 0.8, LoadToClick: 7 * time.Second, Fingerprint: fp}
}

// TestFeaturesOfAGrab: each feature from its signal, the windows counting requests and users per
// address and fingerprint and forgetting them once the window has passed, the same signals
// counted as replays, a machine's beat, a solve, a datacenter address and the account claims.
func TestFeaturesOfAGrab(t *testing.T) {
	nets, err := ParseNetworks([]byte("198.51.100.0/24\n"))
	if err != nil {
		t.Fatal(err)
	}
	list := &Networks{prefixes: nets}
	f := NewFeatures(time.Minute, list)
	ip, dc := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("198.51.100.7")

	v := f.Grab(Signal{IP: ip, User: "ann", At: t0, Page: human("00112233445566778899aabbccddeeff")})
	want := map[int]float64{FeaturePage: 1, FeatureMoves: math.Log1p(140), FeaturePath: math.Log1p(2300),
		FeatureDirectionEntropy: 2.4, FeatureSpeedCV: 0.8, FeatureLoadToClick: math.Log1p(7), FeatureFingerprint: 1,
		FeatureIPRequests: math.Log1p(1), FeatureIPUsers: math.Log1p(1), FeatureFPRequests: math.Log1p(1),
		FeatureFPUsers: math.Log1p(1), FeatureUserClicks: math.Log1p(1)}
	for i, x := range v {
		if math.Abs(x-want[i]) > 1e-12 {
			t.Errorf("%s = %v, want %v", FeatureNames[i], x, want[i])
		}
	}
	// Four more accounts on the same address and fingerprint, replaying ann's signals.
	for i, u := range []string{"b1", "b2", "b3", "b4"} {
		v = f.Grab(Signal{IP: ip, User: u, At: t0.Add(time.Duration(i+1) * time.Second), Page: human("00112233445566778899aabbccddeeff")})
	}
	if v[FeatureIPRequests] != math.Log1p(5) || v[FeatureIPUsers] != math.Log1p(5) || v[FeatureFPUsers] != math.Log1p(5) ||
		v[FeatureReplays] != math.Log1p(4) {
		t.Errorf("the fifth account: ip %v/%v fp users %v replays %v", v[FeatureIPRequests], v[FeatureIPUsers], v[FeatureFPUsers], v[FeatureReplays])
	}
	// The window passed: the address is new again.
	v = f.Grab(Signal{IP: ip, User: "ann", At: t0.Add(2 * time.Minute)})
	if v[FeatureIPRequests] != math.Log1p(1) || v[FeatureIPUsers] != math.Log1p(1) || v[FeaturePage] != 0 || v[FeatureUserClicks] != math.Log1p(1) {
		t.Errorf("after the window: ip %v/%v page %v clicks %v", v[FeatureIPRequests], v[FeatureIPUsers], v[FeaturePage], v[FeatureUserClicks])
	}
	// A script's beat: every 200 ms exactly; a person's: uneven.
	for i := range 6 {
		v = f.Grab(Signal{IP: dc, User: "bot", At: t0.Add(time.Duration(i) * 200 * time.Millisecond)})
	}
	if v[FeatureCadence] != 1 || v[FeatureDatacenter] != 1 || v[FeatureUserClicks] != math.Log1p(6) {
		t.Errorf("the script: cadence %v datacenter %v clicks %v", v[FeatureCadence], v[FeatureDatacenter], v[FeatureUserClicks])
	}
	for i, ms := range []int{0, 900, 1300, 3500, 3900, 7000} {
		v = f.Grab(Signal{IP: ip, User: "bea", At: t0.Add(time.Duration(ms) * time.Millisecond)})
		if i == 1 && v[FeatureCadence] != 0 {
			t.Errorf("two clicks: cadence %v, want 0 (not enough)", v[FeatureCadence])
		}
	}
	if v[FeatureCadence] > 0.5 || v[FeatureDatacenter] != 0 {
		t.Errorf("the person: cadence %v datacenter %v", v[FeatureCadence], v[FeatureDatacenter])
	}
	// A solve, then a grab carrying the account's claims.
	f.Solved("cy", 2500*time.Millisecond, t0)
	v = f.Grab(Signal{User: "cy", At: t0.Add(time.Second), Claims: Claims{Known: true, AccountAge: 30 * 24 * time.Hour, Trust: 0.7}})
	if v[FeatureSolved] != 1 || v[FeatureSolveTime] != math.Log1p(2.5) || v[FeatureClaims] != 1 ||
		math.Abs(v[FeatureAccountAge]-math.Log1p(30)) > 1e-12 || v[FeatureTrust] != 0.7 {
		t.Errorf("solve %v/%v claims %v age %v trust %v", v[FeatureSolved], v[FeatureSolveTime], v[FeatureClaims], v[FeatureAccountAge], v[FeatureTrust])
	}
	if v = f.Grab(Signal{User: "cy", At: t0.Add(3 * time.Minute)}); v[FeatureSolved] != 0 {
		t.Errorf("a solve out of the window still counts: %v", v[FeatureSolved])
	}
}

// TestFeatureMemoryIsBounded: a flood of new addresses, each seen once, keeps no more than the
// shards' bound, and one address's users saturate at maxKeyUsers.
func TestFeatureMemoryIsBounded(t *testing.T) {
	f := NewFeatures(time.Minute, nil)
	f.windows.maxKeys = 100
	for i := range 50_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		f.Grab(Signal{IP: a, At: t0})
	}
	kept := 0
	for i := range f.windows.addrs {
		kept += len(f.windows.addrs[i].m)
	}
	if kept == 0 || kept > shards*f.windows.maxKeys {
		t.Fatalf("%d addresses kept, the bound is %d", kept, shards*f.windows.maxKeys)
	}
	ip := netip.MustParseAddr("203.0.113.1")
	var v Vector
	for i := range 500 {
		v = f.Grab(Signal{IP: ip, User: "u" + string(rune('a'+i%26)) + string(rune('a'+i/26)), At: t0})
	}
	if v[FeatureIPUsers] != math.Log1p(maxKeyUsers) {
		t.Fatalf("500 users on one address: %v, want the saturation at %d", math.Expm1(v[FeatureIPUsers]), maxKeyUsers)
	}
}

// TestPageCheck: what a page can measure passes; anything else is named.
func TestPageCheck(t *testing.T) {
	if err := human("00112233445566778899aabbccddeeff").Check(); err != nil {
		t.Fatalf("a person's signals: %v", err)
	}
	if err := (Page{}).Check(); err != nil {
		t.Fatalf("a page that saw nothing: %v", err)
	}
	for name, p := range map[string]Page{
		"negative moves":     {Moves: -1},
		"too many moves":     {Moves: MaxMoves + 1},
		"a path, no move":    {PathPx: 10},
		"NaN path":           {Moves: 1, PathPx: math.NaN()},
		"entropy above 3":    {DirectionEntropy: 3.5},
		"infinite speed":     {SpeedCV: math.Inf(1)},
		"a day to click":     {LoadToClick: MaxLoadToClick + time.Second},
		"a short print":      {Fingerprint: "abc"},
		"an uppercase print": {Fingerprint: "00112233445566778899AABBCCDDEEFF"},
	} {
		if err := p.Check(); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

// modelFile writes a model weighing the page's signals and the address's users: a grab without
// signals from a crowded address scores high.
func modelFile(t *testing.T, path, version string, noSignals float64) {
	t.Helper()
	m := Model{Format: ModelFormat, Version: version, ChallengeAt: 0.6, BlockAt: 0.9, Features: []Feature{
		{Name: "page_signals", Mean: 0.5, Scale: 0.5, Weight: -noSignals},
		{Name: "ip_users", Mean: 0, Scale: 1, Weight: 2},
		{Name: "direction_entropy", Mean: 1, Scale: 1, Weight: -0.5},
	}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

// writeFile replaces path's content and moves its time on, so that a reload sees the change
// even within the file system's time resolution.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	old, _ := os.Stat(path)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if old != nil {
		at := old.ModTime().Add(time.Second)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEngineRunsTheModel: with a model file the model decides and names the features that
// moved it; the file is read again when it changes, and one that does not load leaves the model
// in use and says why; shadow mode counts the model's decision and lets the rules act.
func TestEngineRunsTheModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	modelFile(t, path, "v1", 1)
	var seen []Verdict
	e, err := Open(Options{Rules: []Rule{SolveTime{Fastest: time.Second}}, Features: NewFeatures(time.Minute, nil), ModelPath: path})
	if err != nil {
		t.Fatal(err)
	}
	e.Observe = func(v Verdict) { seen = append(seen, v) }
	ip := netip.MustParseAddr("203.0.113.1")
	v := judge(t, e, Signal{IP: ip, User: "ann", At: t0, Page: human("")})
	if v.Rule != "model" || !v.Scored || v.Decision != Allow || v.Version != "v1" || v.Score >= 0.6 {
		t.Fatalf("a person's grab: %+v", v)
	}
	// A script with no signals, the third account on the address: log-odds 1 + 2·log 4 - 0.5·(-1).
	judge(t, e, Signal{IP: ip, User: "b1", At: t0})
	v = judge(t, e, Signal{IP: ip, User: "b2", At: t0})
	if want := sigmoid(1 + 2*math.Log1p(3) + 0.5); math.Abs(v.Score-want) > 1e-12 || v.Decision != Block {
		t.Fatalf("the third account, no signals: %+v, want a block at %v", v, want)
	}
	if got := strings.Join(v.TopFeatures(), ","); got != "ip_users,page_signals,direction_entropy" {
		t.Errorf("top features %q", got)
	}
	if len(seen) != 3 || seen[2].Decision != Block {
		t.Errorf("observed %d verdicts, want every score (3)", len(seen))
	}
	if st := e.Status(); st.Version != "v1" || st.Features != 3 || st.Error != "" || st.LoadedAt.IsZero() {
		t.Errorf("status %+v", st)
	}
	// A broken file: v1 stays, and says so; then v2 loads.
	writeFile(t, path, []byte(`{"format":"seckill.risk.model/v1","version":"v2"`))
	if changed, err := e.Reload(); changed || err == nil {
		t.Fatalf("a broken file: changed %v, %v", changed, err)
	}
	if st := e.Status(); st.Version != "v1" || st.Error == "" {
		t.Fatalf("after a broken file: %+v, want v1 with the error", st)
	}
	if v := judge(t, e, Signal{IP: ip, User: "b3", At: t0}); v.Version != "v1" {
		t.Fatalf("scored by %q after a broken file, want v1", v.Version)
	}
	modelFile(t, path, "v2", 0)
	if changed, err := e.Reload(); !changed || err != nil {
		t.Fatalf("a good file again: changed %v, %v", changed, err)
	}
	if st := e.Status(); st.Version != "v2" || st.Error != "" {
		t.Fatalf("after v2: %+v", st)
	}
	if changed, err := e.Reload(); changed || err != nil {
		t.Fatalf("an unchanged file: changed %v, %v", changed, err)
	}
	// A model naming a feature this node does not compute is refused at the start.
	other := filepath.Join(t.TempDir(), "other.json")
	writeFile(t, other, []byte(`{"format":"seckill.risk.model/v1","version":"x","features":[{"name":"mouse_colour","mean":0,"scale":1,"weight":1}],"bias":0,"challenge_at":0.6,"block_at":0.9,"trained":{}}`))
	if _, err := Open(Options{Features: NewFeatures(0, nil), ModelPath: other}); err == nil || !strings.Contains(err.Error(), "mouse_colour") {
		t.Fatalf("an unknown feature: %v", err)
	}
	if _, err := Open(Options{ModelPath: path}); err == nil {
		t.Fatal("a model without features opened")
	}
	// Thresholds of the node's own override the file's.
	if _, err := Open(Options{Features: NewFeatures(0, nil), ModelPath: path, ChallengeAt: 0.95, BlockAt: 0.9}); err == nil {
		t.Fatal("a challenge above the block opened")
	}
}

// TestShadowMode: the rules decide, the model's decision rides along to be counted.
func TestShadowMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	modelFile(t, path, "v1", 4)
	e, err := Open(Options{Rules: []Rule{&AccountsPerIP{ChallengeAbove: 5, BlockAt: 50, Window: time.Minute}},
		Features: NewFeatures(time.Minute, nil), ModelPath: path, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	v := judge(t, e, Signal{IP: netip.MustParseAddr("203.0.113.1"), User: "bot", At: t0})
	if v.Decision != Allow || v.Rule != "" || !v.Scored || !v.Shadow || v.ModelDecision != Block || v.TopN == 0 {
		t.Fatalf("shadow: %+v, want the rules' allow with the model's block beside it", v)
	}
}

// TestRecorder: every grab's features and verdict are written (a solve the engine was told of
// among them), and read back as a recording that is not yet labelled.
func TestRecorder(t *testing.T) {
	dir := t.TempDir()
	rec, err := OpenRecorder(filepath.Join(dir, "rec.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Options{Features: NewFeatures(0, nil), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	judge(t, e, Signal{IP: netip.MustParseAddr("203.0.113.1"), User: "ann", Activity: "a1", At: t0, Page: human("")})
	answer(t, e, Signal{User: "bob", Activity: "a1", At: t0, Solve: 4 * time.Second}) // the solve is bob's next grab's feature
	judge(t, e, Signal{User: "bob", Activity: "a1", At: t0.Add(time.Second)})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "rec.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ls, err := ReadRecords(f)
	if err != nil || len(ls) != 2 {
		t.Fatalf("records %v, %v", ls, err)
	}
	if l := ls[0]; l.User != "ann" || l.Activity != "a1" || l.IP != "203.0.113.1" || l.Decision != "allow" || l.Bot != nil ||
		len(l.Features) != NumFeatures || l.Features["page_signals"] != 1 || !l.At.Equal(t0) || l.Score != nil {
		t.Errorf("ann's record: %+v", l)
	}
	if l := ls[1]; l.User != "bob" || l.Features["solved"] != 1 || l.Features["solve_time"] != math.Log1p(4) || l.Features["page_signals"] != 0 {
		t.Errorf("bob's record after his solve: %+v", l)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ReadLabelled(f, nil); err == nil || !strings.Contains(err.Error(), "no label") {
		t.Errorf("an unlabelled recording read as labelled: %v", err)
	}
}

// BenchmarkModelGrab is the whole judgement of a grab by a model: the features from the
// windows, the score and, for a challenge, the explanation.
func BenchmarkModelGrab(b *testing.B) {
	path := filepath.Join(b.TempDir(), "model.json")
	m := Model{Format: ModelFormat, Version: "bench", ChallengeAt: 0.6, BlockAt: 0.9}
	for i, name := range FeatureNames {
		m.Features = append(m.Features, Feature{Name: name, Mean: 0.1, Scale: 1, Weight: float64(i%5) - 2})
	}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	e, err := Open(Options{Features: NewFeatures(time.Minute, nil), ModelPath: path})
	if err != nil {
		b.Fatal(err)
	}
	s := Signal{IP: netip.MustParseAddr("203.0.113.1"), User: "ann", At: t0, Page: human("00112233445566778899aabbccddeeff")}
	for b.Loop() {
		s.At = s.At.Add(time.Millisecond)
		e.Grab(context.Background(), s)
	}
}

// BenchmarkScorer is the model's part alone: the score and the top features of one vector.
func BenchmarkScorer(b *testing.B) {
	m := &Model{Format: ModelFormat, Version: "bench", ChallengeAt: 0.6, BlockAt: 0.9}
	for i, name := range FeatureNames {
		m.Features = append(m.Features, Feature{Name: name, Mean: 0.1, Scale: 1, Weight: float64(i%5) - 2})
	}
	s, err := Bind(m, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	var v Vector
	for i := range v {
		v[i] = float64(i)
	}
	if n := testing.AllocsPerRun(100, func() { s.judge(&v) }); n != 0 {
		b.Fatalf("a judgement allocates %v times", n)
	}
	for b.Loop() {
		s.judge(&v)
	}
}
