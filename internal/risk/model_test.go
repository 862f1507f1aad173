package risk

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// sample draws n samples from a known logistic model: x ~ N(0, 1) per feature, bot with
// probability σ(bias + w·x).
func sample(seed uint64, n int, bias float64, w []float64) ([][]float64, []bool) {
	r := rand.New(rand.NewPCG(seed, 7))
	xs, ys := make([][]float64, n), make([]bool, n)
	for i := range n {
		x := make([]float64, len(w))
		z := bias
		for j := range w {
			x[j] = r.NormFloat64()
			z += w[j] * x[j]
		}
		xs[i], ys[i] = x, r.Float64() < sigmoid(z)
	}
	return xs, ys
}

// TestFitRecoversAKnownModel: on data drawn from a logistic model, the fit finds its weights.
func TestFitRecoversAKnownModel(t *testing.T) {
	want := []float64{2, -1, 0}
	xs, ys := sample(1, 20_000, -0.5, want)
	m, err := Fit([]string{"a", "b", "noise"}, xs, ys, FitOptions{Version: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	// The fit works on standardised features: its weight per raw unit is weight/scale.
	for j, f := range m.Features {
		if got := f.Weight / f.Scale; math.Abs(got-want[j]) > 0.1 {
			t.Errorf("feature %s: weight %.3f, want %.1f", f.Name, got, want[j])
		}
	}
	bias := m.Bias
	for _, f := range m.Features {
		bias -= f.Weight * f.Mean / f.Scale
	}
	if math.Abs(bias+0.5) > 0.1 || m.Trained.Samples != 20_000 || m.Trained.Iterations < 2 {
		t.Errorf("bias %.3f, want -0.5; trained %+v", bias, m.Trained)
	}
	// Held out: a fresh draw scores as the true model would, about AUC 0.9.
	hx, hy := sample(2, 5_000, -0.5, want)
	e, err := Evaluate(m, hx, hy)
	if err != nil || e.AUC < 0.85 || e.Samples != 5_000 || e.TruePositives+e.FalseNegatives+e.FalsePositives+e.TrueNegatives != 5_000 {
		t.Fatalf("held-out evaluation %+v, %v", e, err)
	}
}

// TestFitBalanced: on a draw of about four bots to one human, the balanced fit weighs the
// classes alike: the weights stay those of the draw and the bias drops by the log of the bots'
// odds in it, so fewer humans are challenged.
func TestFitBalanced(t *testing.T) {
	want := []float64{2, -1}
	xs, ys := sample(3, 20_000, math.Log(9), want)
	plain, err := Fit([]string{"a", "b"}, xs, ys, FitOptions{Version: "p"})
	if err != nil {
		t.Fatal(err)
	}
	even, err := Fit([]string{"a", "b"}, xs, ys, FitOptions{Version: "b", Balanced: true})
	if err != nil {
		t.Fatal(err)
	}
	if !even.Trained.Balanced || plain.Trained.Balanced {
		t.Fatalf("trained notes %+v, %+v", plain.Trained, even.Trained)
	}
	for j := range want {
		if a, b := plain.Features[j].Weight, even.Features[j].Weight; math.Abs(a-b) > 0.15*math.Abs(a) {
			t.Errorf("feature %d: weight %.3f balanced, %.3f plain: want about the same", j, b, a)
		}
	}
	pos := 0
	for _, y := range ys {
		if y {
			pos++
		}
	}
	// Weighing bots by n/2pos and humans by n/2neg moves the bias by ln(neg/pos).
	if d, want := plain.Bias-even.Bias, math.Log(float64(pos)/float64(len(ys)-pos)); math.Abs(d-want) > 0.1 {
		t.Errorf("the balanced bias is %.3f below the plain one, want about ln(bots/humans) = %.3f", d, want)
	}
	ep, _ := Evaluate(plain, xs, ys)
	eb, _ := Evaluate(even, xs, ys)
	if eb.HumansChallenged >= ep.HumansChallenged {
		t.Errorf("humans challenged: %.3f balanced, %.3f plain", eb.HumansChallenged, ep.HumansChallenged)
	}
}

func TestFitRefusesWhatCannotBeFitted(t *testing.T) {
	xs := [][]float64{{1}, {2}}
	for name, f := range map[string]func() error{
		"one class":    func() error { _, err := Fit([]string{"a"}, xs, []bool{true, true}, FitOptions{}); return err },
		"short labels": func() error { _, err := Fit([]string{"a"}, xs, []bool{true}, FitOptions{}); return err },
		"a short row":  func() error { _, err := Fit([]string{"a", "b"}, xs, []bool{true, false}, FitOptions{}); return err },
		"no features":  func() error { _, err := Fit(nil, [][]float64{{}, {}}, []bool{true, false}, FitOptions{}); return err },
		"bad thresholds": func() error {
			_, err := Fit([]string{"a"}, xs, []bool{true, false}, FitOptions{Version: "v", ChallengeAt: 0.95, BlockAt: 0.9})
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: fitted", name)
		}
	}
}

// TestModelFile: a fitted model survives its file; a file that is wrong in any part is refused
// whole.
func TestModelFile(t *testing.T) {
	xs, ys := sample(3, 2_000, 0, []float64{1, 1})
	m, err := Fit([]string{"a", "b"}, xs, ys, FitOptions{Version: "2026-12-02"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseModel(b)
	if err != nil || back.Score(xs[0]) != m.Score(xs[0]) || strings.Join(back.Names(), ",") != "a,b" {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	for _, bad := range []struct{ name, from, to string }{
		{"another format", ModelFormat, "seckill.risk.model/v9"},
		{"no version", `"version":"2026-12-02"`, `"version":""`},
		{"a feature twice", `"name":"b"`, `"name":"a"`},
		{"a field it does not know", `"bias":`, `"intercept":1,"bias":`},
		{"thresholds crossed", `"challenge_at":0.6`, `"challenge_at":0.95`},
		{"not JSON", `{`, `[`},
	} {
		if _, err := ParseModel([]byte(strings.Replace(string(b), bad.from, bad.to, 1))); err == nil {
			t.Errorf("%s: parsed", bad.name)
		}
	}
	flat := *m
	flat.Features = append([]Feature(nil), m.Features...)
	flat.Features[1].Scale = 0
	fb, err := json.Marshal(flat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseModel(fb); err == nil || !strings.Contains(err.Error(), "positive scale") {
		t.Errorf("a scale of zero: %v", err)
	}
}

func testModel() *Model {
	return &Model{Format: ModelFormat, Version: "t", ChallengeAt: 0.6, BlockAt: 0.9, Features: []Feature{
		{Name: "cadence", Mean: 0, Scale: 1, Weight: 2}, {Name: "entropy", Mean: 1, Scale: 0.5, Weight: -1},
		{Name: "per_ip", Mean: 2, Scale: 2, Weight: 0.5}, {Name: "age", Mean: 0, Scale: 1, Weight: -3}}}
}

// TestScoreAndExplain: the score is the logistic of the weighted, standardised features; the
// explanation lists the features pushing towards a bot, largest first; neither allocates.
func TestScoreAndExplain(t *testing.T) {
	m := testModel()
	x := []float64{1, 0, 6, 0} // log-odds 2 + 2 + 1 + 0
	if got, want := m.Score(x), 1/(1+math.Exp(-5)); math.Abs(got-want) > 1e-12 || m.Decide(got) != Block {
		t.Fatalf("score %v (%s), want %v (block)", got, m.Decide(got), want)
	}
	if d := m.Decide(m.Score([]float64{0, 1, 2, 0})); d != Allow { // 0.5
		t.Errorf("an even score: %s, want allow", d)
	}
	top := m.Explain(x, make([]Contribution, 0, 2))
	if len(top) != 2 || top[0].LogOdds != 2 || top[1].LogOdds != 2 || top[0].Feature == top[1].Feature {
		t.Errorf("top two: %+v, want cadence and entropy at 2 each", top)
	}
	if got := m.Explain(x, make([]Contribution, 0, 8)); len(got) != 3 || got[2].Feature != "per_ip" {
		t.Errorf("every pushing feature: %+v", got)
	}
	if m.Score([]float64{1}) != 0 || len(m.Explain([]float64{1}, make([]Contribution, 0, 2))) != 0 {
		t.Error("a vector of the wrong length must score 0 and explain nothing")
	}
	buf := make([]Contribution, 0, 3)
	if n := testing.AllocsPerRun(100, func() { m.Score(x); m.Explain(x, buf) }); n != 0 {
		t.Errorf("scoring allocates %v times", n)
	}
}

func TestEvaluate(t *testing.T) {
	m := &Model{Format: ModelFormat, Version: "t", ChallengeAt: 0.6, BlockAt: 0.9,
		Features: []Feature{{Name: "x", Scale: 1, Weight: 1}}}
	// Scores σ(x): 3 bots high, 2 humans low, one human at 0.73 (challenged), one bot at 0.5.
	xs := [][]float64{{3}, {2.5}, {4}, {-2}, {-3}, {1}, {0}}
	ys := []bool{true, true, true, false, false, false, true}
	e, err := Evaluate(m, xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	if e.TruePositives != 3 || e.FalseNegatives != 1 || e.FalsePositives != 1 || e.TrueNegatives != 2 || e.HumansBlocked != 0 {
		t.Fatalf("confusion %+v", e)
	}
	if e.Precision != 0.75 || e.Recall != 0.75 || math.Abs(e.HumansChallenged-1.0/3) > 1e-12 {
		t.Errorf("precision %v recall %v humans challenged %v", e.Precision, e.Recall, e.HumansChallenged)
	}
	// Of 4×3 bot-human pairs the bot scores higher in all but (0 vs 1): 11/12.
	if math.Abs(e.AUC-11.0/12) > 1e-12 {
		t.Errorf("AUC %v, want 11/12", e.AUC)
	}
	ties, _ := Evaluate(m, [][]float64{{1}, {1}}, []bool{true, false})
	if ties.AUC != 0.5 {
		t.Errorf("a tie: AUC %v, want 0.5", ties.AUC)
	}
}

func BenchmarkScore(b *testing.B) {
	m := testModel()
	x := []float64{1, 0, 6, 0}
	var sink float64
	for b.Loop() {
		sink += m.Score(x)
	}
	_ = sink
}

func BenchmarkScoreAndExplain(b *testing.B) {
	m := testModel()
	x := []float64{1, 0, 6, 0}
	buf := make([]Contribution, 0, 3)
	for b.Loop() {
		m.Score(x)
		buf = m.Explain(x, buf)
	}
}
