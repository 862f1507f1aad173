package risk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Verdict is the engine's decision and what made it: the rule ("" when every rule allowed), or
// "model" when a trained model decided. When a model scored the request, Scored is set with its
// score, its own decision, its version and the features that moved it most, also in shadow mode,
// where the rules decide and the model's decision is only counted.
type Verdict struct {
	Decision Decision
	Rule     string

	Scored        bool
	Shadow        bool
	Score         float64
	ModelDecision Decision
	Version       string
	Top           [3]Contribution // the largest first; TopN of them are set
	TopN          int
}

// TopFeatures are the names of the features that moved the score most, largest first.
func (v Verdict) TopFeatures() []string {
	out := make([]string, v.TopN)
	for i := range out {
		out[i] = v.Top[i].Feature
	}
	return out
}

// Scorer is a model bound to the features: each of its inputs found in a Vector, and the
// thresholds it decides at.
type Scorer struct {
	Model                *Model
	ChallengeAt, BlockAt float64
	index                []int
}

// Bind binds m to the features, at its own thresholds unless challengeAt and blockAt are set.
// Errors: the model names a feature this node does not compute (a model for another version),
// or the thresholds are out of order.
func Bind(m *Model, challengeAt, blockAt float64) (*Scorer, error) {
	s := &Scorer{Model: m, ChallengeAt: m.ChallengeAt, BlockAt: m.BlockAt, index: make([]int, len(m.Features))}
	if challengeAt > 0 {
		s.ChallengeAt = challengeAt
	}
	if blockAt > 0 {
		s.BlockAt = blockAt
	}
	if !(s.ChallengeAt > 0 && s.ChallengeAt <= s.BlockAt && s.BlockAt <= 1) {
		return nil, fmt.Errorf("risk model %q: thresholds %g and %g: want 0 < challenge <= block <= 1", m.Version, s.ChallengeAt, s.BlockAt)
	}
	for i, f := range m.Features {
		j, ok := FeatureIndex(f.Name)
		if !ok {
			return nil, fmt.Errorf("risk model %q: feature %q is not one this node computes", m.Version, f.Name)
		}
		s.index[i] = j
	}
	return s, nil
}

// inputs gathers the model's inputs from v into x.
func (s *Scorer) inputs(v *Vector, x *[MaxFeatures]float64) []float64 {
	for i, j := range s.index {
		x[i] = v[j]
	}
	return x[:len(s.index)]
}

// Score is the model's score of v. It allocates nothing.
func (s *Scorer) Score(v *Vector) float64 {
	var x [MaxFeatures]float64
	return s.Model.Score(s.inputs(v, &x))
}

// Decide is the decision a score comes to at the scorer's thresholds.
func (s *Scorer) Decide(p float64) Decision { return decide(p, s.ChallengeAt, s.BlockAt) }

// judge scores v into a verdict of the model. It allocates nothing.
func (s *Scorer) judge(v *Vector) Verdict {
	var x [MaxFeatures]float64
	in := s.inputs(v, &x)
	p := s.Model.Score(in)
	d := s.Decide(p)
	out := Verdict{Decision: d, Rule: "model", Scored: true, Score: p, ModelDecision: d, Version: s.Model.Version}
	if d != Allow {
		out.TopN = len(s.Model.Explain(in, out.Top[:0:len(out.Top)]))
	}
	return out
}

// Options configure an Engine.
type Options struct {
	Rules []Rule
	// Features computes what a model scores and a recorder writes; required with either.
	Features *Features
	// ModelPath is the model file (SECKILL_RISK_MODEL); "" runs the rules alone.
	ModelPath string
	// ChallengeAt and BlockAt override the model file's thresholds when set.
	ChallengeAt, BlockAt float64
	// Shadow scores and counts with the model, and lets the rules decide.
	Shadow bool
	// Recorder, when set, is given every grab's features (SECKILL_RISK_RECORD).
	Recorder *Recorder
	// Windows, when set, keeps the windows of the features and of the rules that count
	// (AccountsPerIP, Cadence) for every node of a cluster: the engine counts each grab there,
	// once, and those rules judge by its counts (Signal.Seen) instead of their own memory. Nil:
	// the features and the rules keep their own, in this process (one node).
	Windows Windows
}

// Engine judges requests: with the rules, or with a trained model that takes over from them
// (unless in shadow mode). The model file is read again when it changes (Reload); one that no
// longer loads leaves the model that did in use, and says so (Status).
type Engine struct {
	rules    []Rule
	features *Features
	o        Options
	scorer   atomic.Pointer[Scorer]
	// reads are the shared windows (Options.Windows) the rules read, and maxUsers the most
	// users per address a rule or the features weigh.
	reads    windowsRead
	maxUsers int

	mu     sync.Mutex
	status ModelStatus
	mod    time.Time // the model file's, when last read
	size   int64

	// Observe, when set, is told of every decision other than allow, and of every model score.
	Observe func(v Verdict)
}

// ModelStatus says which model an engine runs, and whether the file on disk is another.
type ModelStatus struct {
	Path     string    `json:"path,omitempty"`
	Version  string    `json:"version,omitempty"` // "" when no model runs
	Features int       `json:"features,omitempty"`
	Shadow   bool      `json:"shadow,omitempty"`
	LoadedAt time.Time `json:"loaded_at,omitzero"`
	// Error is why the file on disk did not load: the model in use is the one before it.
	Error string `json:"error,omitempty"`
}

// New returns an engine of rules alone.
func New(rules ...Rule) *Engine { return &Engine{rules: rules} }

// Open returns an engine of o, with its model loaded. Errors: the model file does not load, or
// a model or a recorder is configured without Features.
func Open(o Options) (*Engine, error) {
	if (o.ModelPath != "" || o.Recorder != nil) && o.Features == nil {
		return nil, errors.New("risk: a model or a recorder needs the features")
	}
	e := &Engine{rules: o.Rules, features: o.Features, o: o}
	e.maxUsers = maxKeyUsers
	for _, r := range o.Rules {
		if c, ok := r.(counts); ok && o.Windows != nil {
			rd := c.reads()
			// A user's beat is judged on the clicks this node saw: counting every grab's click
			// in the shared windows costs a Redis call a grab that nothing else needs (the
			// default rules are the cadence alone), a third of a two-node all-win sale's rate
			// (docs/BENCHMARKS.md §15). The model's features, which read every window, still
			// count the clicks there.
			rd.clicks = false
			e.reads.ip, e.reads.clicks = e.reads.ip || rd.ip, e.reads.clicks || rd.clicks
			e.maxUsers = max(e.maxUsers, rd.users)
		}
	}
	e.status = ModelStatus{Path: o.ModelPath, Shadow: o.Shadow}
	if o.ModelPath != "" {
		if _, err := e.Reload(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Reload reads the model file again if it changed since it was last read (its time or size),
// and the networks file, and reports whether the model changed. A model file that does not load
// leaves the one in use: the error is returned, and kept in Status.
func (e *Engine) Reload() (bool, error) {
	var errs []error
	if n := e.networks(); n != nil {
		if _, err := n.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	changed, err := e.reloadModel()
	return changed, errors.Join(append(errs, err)...)
}

func (e *Engine) networks() *Networks {
	if e == nil || e.features == nil {
		return nil
	}
	return e.features.networks
}

func (e *Engine) reloadModel() (bool, error) {
	if e == nil || e.o.ModelPath == "" {
		return false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	fail := func(err error) (bool, error) {
		e.status.Error = err.Error()
		return false, err
	}
	fi, err := os.Stat(e.o.ModelPath)
	if err != nil {
		return fail(fmt.Errorf("risk model: %w", err))
	}
	if fi.ModTime().Equal(e.mod) && fi.Size() == e.size {
		return false, nil
	}
	data, err := os.ReadFile(e.o.ModelPath)
	if err != nil {
		return fail(fmt.Errorf("risk model: %w", err))
	}
	e.mod, e.size = fi.ModTime(), fi.Size() // a broken file is not read again until it changes
	m, err := ParseModel(data)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", e.o.ModelPath, err))
	}
	s, err := Bind(m, e.o.ChallengeAt, e.o.BlockAt)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", e.o.ModelPath, err))
	}
	e.scorer.Store(s)
	e.status = ModelStatus{Path: e.o.ModelPath, Version: m.Version, Features: len(m.Features), Shadow: e.o.Shadow,
		LoadedAt: time.Now()}
	return true, nil
}

// Status says which model runs, and why the file on disk is not it when it failed to load.
func (e *Engine) Status() ModelStatus {
	if e == nil {
		return ModelStatus{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Flush writes out the recording's buffered lines (none without a recorder).
func (e *Engine) Flush() error {
	if e == nil || e.o.Recorder == nil {
		return nil
	}
	return e.o.Recorder.Flush()
}

// Close flushes and closes the recording.
func (e *Engine) Close() error {
	if e == nil || e.o.Recorder == nil {
		return nil
	}
	return e.o.Recorder.Close()
}

// Networks is the list of datacenter and proxy networks the features look addresses up in.
func (e *Engine) Networks() *Networks { return e.networks() }

// Features reports whether the engine computes the features of a grab (a model or a
// recorder uses them): without, what only they read need not be gathered.
func (e *Engine) Features() bool {
	return e != nil && (e.scorer.Load() != nil || e.o.Recorder != nil)
}

// Grab judges a grab. A nil engine allows everything. With windows shared by the nodes
// (Options.Windows), the grab is counted there first, in one call, when a rule or the features
// read the counts. Errors: the shared windows failed, and the grab cannot be judged.
func (e *Engine) Grab(ctx context.Context, s Signal) (Verdict, error) {
	if e == nil {
		return Verdict{}, nil
	}
	sc := e.scorer.Load()
	features := sc != nil || e.o.Recorder != nil
	if e.o.Windows != nil && (features || e.reads != windowsRead{}) {
		k := keysOf(s, features) // the features read every window
		if !features {           // the rules, those they read
			if !e.reads.ip {
				k.IP = ""
			}
			k.Clicks = k.Clicks && e.reads.clicks
		}
		k.MaxUsers = e.maxUsers
		seen, err := e.o.Windows.Count(ctx, k, s.At)
		if err != nil {
			return Verdict{}, fmt.Errorf("risk windows: %w", err)
		}
		s.Seen = &seen
	}
	if !features {
		return e.observe(e.rule(s, Rule.Grab)), nil
	}
	var vec Vector
	if s.Seen != nil {
		vec = e.features.vector(s, s.Seen)
	} else {
		vec = e.features.Grab(s)
	}
	var v Verdict
	switch {
	case sc == nil:
		v = e.rule(s, Rule.Grab)
	case e.o.Shadow:
		m := sc.judge(&vec)
		v = e.rule(s, Rule.Grab)
		v.Scored, v.Shadow, v.Score, v.ModelDecision, v.Version, v.Top, v.TopN = true, true, m.Score, m.ModelDecision, m.Version, m.Top, m.TopN
	default:
		v = sc.judge(&vec)
	}
	if e.o.Recorder != nil {
		e.o.Recorder.Record(s, &vec, v)
	}
	return e.observe(v), nil
}

// Answer judges a right answer to a challenge: by the rules (the solve-time floor), with or
// without a model, which weighs the solve time at the grab that follows. Errors: the shared
// windows failed to record the solve.
func (e *Engine) Answer(ctx context.Context, s Signal) (Verdict, error) {
	if e == nil {
		return Verdict{}, nil
	}
	if e.features != nil && s.User != "" {
		if e.o.Windows == nil {
			e.features.Solved(s.User, s.Solve, s.At)
		} else if err := e.o.Windows.Solved(ctx, s.User, s.Solve, s.At); err != nil {
			return Verdict{}, fmt.Errorf("risk windows: %w", err)
		}
	}
	return e.observe(e.rule(s, Rule.Answer)), nil
}

func (e *Engine) rule(s Signal, ask func(Rule, Signal) Decision) Verdict {
	var v Verdict
	for _, r := range e.rules {
		if d := ask(r, s); d > v.Decision {
			v = Verdict{Decision: d, Rule: r.Name()}
		}
	}
	return v
}

func (e *Engine) observe(v Verdict) Verdict {
	if (v.Decision != Allow || v.Scored) && e.Observe != nil {
		e.Observe(v)
	}
	return v
}
