package risk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// A trained model scores a request from its features: a logistic regression over standardised
// features, p = σ(bias + Σ weight·(x - mean)/scale), kept as a versioned JSON file that names
// each feature, so that a model and the code that feeds it cannot disagree on what a column is.
// Scoring allocates nothing; Explain says which features moved the score most, for the logs.

// ModelFormat names the file format a model is stored in.
const ModelFormat = "seckill.risk.model/v1"

// Model is a trained scorer.
type Model struct {
	Format  string `json:"format"`
	Version string `json:"version"`
	// Features are the model's inputs, in the order Score takes them.
	Features []Feature `json:"features"`
	Bias     float64   `json:"bias"`
	// ChallengeAt and BlockAt are the scores from which a request is challenged, and blocked.
	ChallengeAt float64 `json:"challenge_at"`
	BlockAt     float64 `json:"block_at"`
	// Trained says what the model was fitted on, for a person reading the file.
	Trained TrainingNote `json:"trained"`
}

// Feature is one input: its name, how it is standardised, and its weight.
type Feature struct {
	Name   string  `json:"name"`
	Mean   float64 `json:"mean"`
	Scale  float64 `json:"scale"`
	Weight float64 `json:"weight"`
}

// TrainingNote records how a model was made.
type TrainingNote struct {
	Samples    int     `json:"samples"`
	Positives  int     `json:"positives"` // labelled bots
	Iterations int     `json:"iterations"`
	L2         float64 `json:"l2"`
	Balanced   bool    `json:"balanced,omitempty"`
	LogLoss    float64 `json:"log_loss"` // on the training set, at the end
}

// The default thresholds of the design documents: challenge from 0.6, block from 0.9.
const (
	DefaultChallengeAt = 0.6
	DefaultBlockAt     = 0.9
)

// MaxFeatures bounds a model's inputs.
const MaxFeatures = 64

// ParseModel reads a model file and checks it whole: its format, no field it does not know,
// unique feature names, finite numbers, positive scales and thresholds 0 < challenge ≤ block ≤ 1.
func ParseModel(data []byte) (*Model, error) {
	var m Model
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a field this version does not know is a model it cannot run
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("risk model: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("risk model %q: %w", m.Version, err)
	}
	return &m, nil
}

func (m *Model) validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case m.Format != ModelFormat:
		return fmt.Errorf("format %q, want %q", m.Format, ModelFormat)
	case m.Version == "":
		return errors.New("no version")
	case len(m.Features) == 0 || len(m.Features) > MaxFeatures:
		return fmt.Errorf("%d features, want 1 to %d", len(m.Features), MaxFeatures)
	case !finite(m.Bias):
		return errors.New("the bias is not a finite number")
	case !(m.ChallengeAt > 0 && m.ChallengeAt <= m.BlockAt && m.BlockAt <= 1):
		return fmt.Errorf("thresholds %g and %g: want 0 < challenge_at <= block_at <= 1", m.ChallengeAt, m.BlockAt)
	}
	seen := map[string]bool{}
	for _, f := range m.Features {
		switch {
		case f.Name == "" || seen[f.Name]:
			return fmt.Errorf("feature %q: empty or named twice", f.Name)
		case !finite(f.Mean) || !finite(f.Weight) || !finite(f.Scale) || f.Scale <= 0:
			return fmt.Errorf("feature %q: mean, weight and a positive scale must be finite numbers", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// Names returns the model's feature names, in the order Score takes them.
func (m *Model) Names() []string {
	out := make([]string, len(m.Features))
	for i, f := range m.Features {
		out[i] = f.Name
	}
	return out
}

// Score returns the probability that the request of features x (in the order of Features) is a
// bot's. It allocates nothing. A vector of another length scores 0: the caller's bug, which
// Names lets it avoid.
func (m *Model) Score(x []float64) float64 {
	if len(x) != len(m.Features) {
		return 0
	}
	z := m.Bias
	for i := range m.Features {
		f := &m.Features[i]
		z += f.Weight * (x[i] - f.Mean) / f.Scale
	}
	return sigmoid(z)
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// Decide is the decision a score comes to at the model's thresholds.
func (m *Model) Decide(p float64) Decision { return decide(p, m.ChallengeAt, m.BlockAt) }

// decide is the decision score p comes to at the thresholds.
func decide(p, challengeAt, blockAt float64) Decision {
	switch {
	case p >= blockAt:
		return Block
	case p >= challengeAt:
		return Challenge
	}
	return Allow
}

// Contribution is how much one feature moved a score's log-odds.
type Contribution struct {
	Feature string
	LogOdds float64
}

// Explain writes into top (up to its capacity) the features of x that moved the score most
// towards a bot, largest first, and returns it: what the logs show of a challenge. It allocates
// nothing when top has the capacity.
func (m *Model) Explain(x []float64, top []Contribution) []Contribution {
	top = top[:0]
	if len(x) != len(m.Features) || cap(top) == 0 {
		return top
	}
	for i := range m.Features {
		f := &m.Features[i]
		c := Contribution{Feature: f.Name, LogOdds: f.Weight * (x[i] - f.Mean) / f.Scale}
		if c.LogOdds <= 0 {
			continue
		}
		// Insert in order, dropping the smallest when full.
		at := len(top)
		for at > 0 && top[at-1].LogOdds < c.LogOdds {
			at--
		}
		switch {
		case len(top) < cap(top):
			top = append(top, Contribution{})
		case at == len(top):
			continue
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = c
	}
	return top
}

// FitOptions tune Fit.
type FitOptions struct {
	Version     string
	Iterations  int     // Newton steps (IRLS) at most; 0: 50
	L2          float64 // the ridge penalty on the weights; 0: 1e-3
	ChallengeAt float64 // 0: DefaultChallengeAt
	BlockAt     float64 // 0: DefaultBlockAt
	// Balanced weighs the two classes alike, whatever their counts: a crowd of many bots
	// then does not teach the model that everyone is likely one.
	Balanced bool
}

// Fit trains a model on samples (rows of features named names) labelled bot (true) or human,
// by Newton's method on the L2-penalised log-likelihood of the standardised features. It is
// deterministic: the same data gives the same model.
func Fit(names []string, samples [][]float64, bots []bool, o FitOptions) (*Model, error) {
	n, d := len(samples), len(names)
	switch {
	case n == 0 || n != len(bots):
		return nil, fmt.Errorf("fit: %d samples and %d labels", n, len(bots))
	case d == 0 || d > MaxFeatures:
		return nil, fmt.Errorf("fit: %d features, want 1 to %d", d, MaxFeatures)
	}
	pos := 0
	for i, row := range samples {
		if len(row) != d {
			return nil, fmt.Errorf("fit: sample %d has %d features, want %d", i, len(row), d)
		}
		if bots[i] {
			pos++
		}
	}
	if pos == 0 || pos == n {
		return nil, errors.New("fit: the samples must have both bots and humans")
	}
	if o.Iterations == 0 {
		o.Iterations = 50
	}
	if o.L2 == 0 {
		o.L2 = 1e-3
	}
	if o.ChallengeAt == 0 {
		o.ChallengeAt = DefaultChallengeAt
	}
	if o.BlockAt == 0 {
		o.BlockAt = DefaultBlockAt
	}
	m := &Model{Format: ModelFormat, Version: o.Version, ChallengeAt: o.ChallengeAt, BlockAt: o.BlockAt,
		Features: make([]Feature, d)}
	// Standardise each feature; one that never varies gets scale 1 (and its weight stays ~0).
	for j := range d {
		var sum, sq float64
		for _, row := range samples {
			sum += row[j]
		}
		mean := sum / float64(n)
		for _, row := range samples {
			sq += (row[j] - mean) * (row[j] - mean)
		}
		scale := math.Sqrt(sq / float64(n))
		if scale == 0 || math.IsNaN(scale) {
			scale = 1
		}
		m.Features[j] = Feature{Name: names[j], Mean: mean, Scale: scale}
	}
	z := make([][]float64, n) // the standardised samples with a leading 1 for the bias
	for i, row := range samples {
		z[i] = make([]float64, d+1)
		z[i][0] = 1
		for j := range d {
			z[i][j+1] = (row[j] - m.Features[j].Mean) / m.Features[j].Scale
		}
	}
	weight := [2]float64{1, 1} // of a human, of a bot
	if o.Balanced {
		weight = [2]float64{float64(n) / float64(2*(n-pos)), float64(n) / float64(2*pos)}
	}
	w := make([]float64, d+1)
	grad := make([]float64, d+1)
	hess := make([][]float64, d+1)
	for j := range hess {
		hess[j] = make([]float64, d+1)
	}
	iter := 0
	for ; iter < o.Iterations; iter++ {
		clear(grad)
		for j := range hess {
			clear(hess[j])
		}
		for i, x := range z {
			p := sigmoid(dot(w, x))
			y, c := 0.0, weight[0]
			if bots[i] {
				y, c = 1, weight[1]
			}
			r := c * p * (1 - p)
			for a := range x {
				grad[a] += c * (p - y) * x[a]
				for b := range x {
					hess[a][b] += r * x[a] * x[b]
				}
			}
		}
		for a := 1; a <= d; a++ { // the penalty spares the bias
			grad[a] += o.L2 * float64(n) * w[a]
			hess[a][a] += o.L2 * float64(n)
		}
		step, err := solve(hess, grad)
		if err != nil {
			return nil, fmt.Errorf("fit: %w", err)
		}
		var size float64
		for a := range w {
			w[a] -= step[a]
			size = max(size, math.Abs(step[a]))
		}
		if size < 1e-9 {
			iter++
			break
		}
	}
	m.Bias = w[0]
	for j := range d {
		m.Features[j].Weight = w[j+1]
	}
	var loss float64
	for i, row := range samples {
		p := math.Min(math.Max(m.Score(row), 1e-12), 1-1e-12)
		if bots[i] {
			loss -= math.Log(p)
		} else {
			loss -= math.Log(1 - p)
		}
	}
	m.Trained = TrainingNote{Samples: n, Positives: pos, Iterations: iter, L2: o.L2, Balanced: o.Balanced, LogLoss: loss / float64(n)}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("fit: %w", err)
	}
	return m, nil
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// solve solves h·x = g by Gaussian elimination with partial pivoting (h is small and, with the
// penalty, positive definite).
func solve(h [][]float64, g []float64) ([]float64, error) {
	n := len(g)
	a := make([][]float64, n)
	for i := range a {
		a[i] = append(slices.Clone(h[i]), g[i])
	}
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return nil, errors.New("the features are degenerate: the Hessian is singular")
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r][n]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}

// Evaluation is how a model does on labelled samples it was not fitted on.
type Evaluation struct {
	Samples int `json:"samples"`
	// The confusion at the challenge threshold: a bot challenged or blocked is caught.
	TruePositives  int `json:"true_positives"`  // bots caught
	FalseNegatives int `json:"false_negatives"` // bots allowed
	FalsePositives int `json:"false_positives"` // humans challenged or blocked
	TrueNegatives  int `json:"true_negatives"`  // humans allowed
	// HumansBlocked are the humans at or above the block threshold.
	HumansBlocked int     `json:"humans_blocked"`
	Precision     float64 `json:"precision"`
	Recall        float64 `json:"recall"`
	// HumansChallenged is the share of humans challenged or blocked (FalsePositives / humans).
	HumansChallenged float64 `json:"humans_challenged"`
	AUC              float64 `json:"roc_auc"`
}

// Evaluate scores samples with m and measures it against their labels.
func Evaluate(m *Model, samples [][]float64, bots []bool) (Evaluation, error) {
	if len(samples) == 0 || len(samples) != len(bots) {
		return Evaluation{}, fmt.Errorf("evaluate: %d samples and %d labels", len(samples), len(bots))
	}
	e := Evaluation{Samples: len(samples)}
	type scored struct {
		p   float64
		bot bool
	}
	all := make([]scored, len(samples))
	humans := 0
	for i, x := range samples {
		if len(x) != len(m.Features) {
			return Evaluation{}, fmt.Errorf("evaluate: sample %d has %d features, the model %d", i, len(x), len(m.Features))
		}
		p := m.Score(x)
		all[i] = scored{p, bots[i]}
		caught := m.Decide(p) != Allow
		switch {
		case bots[i] && caught:
			e.TruePositives++
		case bots[i]:
			e.FalseNegatives++
		case caught:
			e.FalsePositives++
			if m.Decide(p) == Block {
				e.HumansBlocked++
			}
		default:
			e.TrueNegatives++
		}
		if !bots[i] {
			humans++
		}
	}
	if tp := e.TruePositives; tp+e.FalsePositives > 0 {
		e.Precision = float64(tp) / float64(tp+e.FalsePositives)
	}
	if bots := e.TruePositives + e.FalseNegatives; bots > 0 {
		e.Recall = float64(e.TruePositives) / float64(bots)
	}
	if humans > 0 {
		e.HumansChallenged = float64(e.FalsePositives) / float64(humans)
	}
	// ROC AUC as the Mann-Whitney statistic: the chance a bot scores above a human (ties half).
	sort.Slice(all, func(i, j int) bool { return all[i].p < all[j].p })
	var rankSum float64
	nBots := e.TruePositives + e.FalseNegatives
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].p == all[i].p {
			j++
		}
		mid := float64(i+j+1) / 2 // the mean rank (1-based) of the tie
		for k := i; k < j; k++ {
			if all[k].bot {
				rankSum += mid
			}
		}
		i = j
	}
	if nBots > 0 && humans > 0 {
		e.AUC = (rankSum - float64(nBots)*float64(nBots+1)/2) / (float64(nBots) * float64(humans))
	}
	return e, nil
}
