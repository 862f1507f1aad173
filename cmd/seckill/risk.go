package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"seckill/internal/bench"
	"seckill/internal/risk"
)

// riskCmd runs `seckill risk gen|label|train|eval`: generating labelled requests from the
// bench's crowd of bots and people, labelling a node's recording, fitting the risk model from
// labelled requests, and measuring one on requests it was not fitted on.
func riskCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("risk: want gen, label, train or eval (seckill risk train -h)")
	}
	switch args[0] {
	case "gen":
		return riskGen(ctx, args[1:], stdout, stderr)
	case "label":
		return riskLabel(args[1:], stdout, stderr)
	case "train":
		return riskTrain(args[1:], stdout, stderr)
	case "eval":
		return riskEval(args[1:], stdout, stderr)
	}
	return fmt.Errorf("risk %q: want gen, label, train or eval", args[0])
}

// riskLabel labels a recording (SECKILL_RISK_RECORD): the grabs of the accounts --bots lists are
// a bot's, the others a person's.
func riskLabel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("risk label", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "a node's recording (`file`, SECKILL_RISK_RECORD)")
	botsFile := fs.String("bots", "", "the bots' accounts (`file`, one user a line, # comments): their grabs are labelled bot, the others human")
	out := fs.String("out", "", "where to write the labelled requests (`file`, JSON lines, for risk train or eval)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *botsFile == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("risk label: want --in FILE --bots FILE --out FILE")
	}
	list, err := os.ReadFile(*botsFile)
	if err != nil {
		return fmt.Errorf("risk label: %w", err)
	}
	bots := map[string]bool{}
	for line := range strings.Lines(string(list)) {
		if u, _, _ := strings.Cut(line, "#"); strings.TrimSpace(u) != "" {
			bots[strings.TrimSpace(u)] = true
		}
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("risk label: %w", err)
	}
	defer f.Close()
	recs, err := risk.ReadRecords(f)
	if err != nil {
		return fmt.Errorf("risk label: %s: %w", *in, err)
	}
	nBots, err := writeLabelled(*out, recs, bots)
	if err != nil {
		return fmt.Errorf("risk label: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "labelled %d requests: %d of a bot (%d accounts listed), %d of a person\n", len(recs), nBots, len(bots), len(recs)-nBots)
	return err
}

// writeLabelled writes the records to path, each labelled a bot's when its user is in bots, and
// returns how many were.
func writeLabelled(path string, recs []risk.Labelled, bots map[string]bool) (int, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	n := 0
	for i := range recs {
		bot := bots[recs[i].User]
		if bot {
			n++
		}
		recs[i].Bot = &bot
		if err := enc.Encode(recs[i]); err != nil {
			return 0, err
		}
	}
	return n, os.WriteFile(path, b.Bytes(), 0o644)
}

// The networks the generated crowd's datacenter bots come from, which its server lists.
var genDatacenters = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")}

// riskGen runs the bench's risk crowd (internal/bench/risk.go) at a server of its own that
// records every grab's features, and writes them labelled: a set to train on, or to evaluate
// on when drawn with another seed.
func riskGen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("risk gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "where to write the labelled requests (`file`, JSON lines)")
	seed := fs.Uint64("seed", 1, "the crowd's seed: it draws every parameter of the profiles, the accounts and their timing")
	humans := fs.Int("humans", 60, "people, each on a real Chromium page")
	bots := fs.Int("bots", 300, "bot accounts, on the API")
	chromium := fs.String("chromium", "/usr/bin/chromium", "the Chromium `binary` the people's pages run in")
	tabs := fs.Int("tabs", 4, "people's pages open at once")
	span := fs.Duration("span", 0, "how long the bots' first clicks are spread over (default: about as long as the people take)")
	jsonOut := fs.Bool("json", false, "print the crowd's report as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 || *humans < 0 || *bots < 0 || *humans+*bots == 0 || *tabs < 1 {
		return errors.New("risk gen: want --out FILE, and some --humans or --bots")
	}
	if *span == 0 { // a page takes about 4 s of looking and moving; tabs run side by side
		*span = time.Duration(max(1, *humans / *tabs)) * 4 * time.Second
	}
	dir, err := os.MkdirTemp("", "seckill-risk-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nets, record := filepath.Join(dir, "networks.txt"), filepath.Join(dir, "record.jsonl")
	var list strings.Builder
	for _, p := range genDatacenters {
		fmt.Fprintln(&list, p)
	}
	if err := os.WriteFile(nets, []byte(list.String()), 0o644); err != nil {
		return err
	}
	c := benchConfig{secret: randomSecret(), adminToken: randomSecret(), serverEnv: map[string]string{
		"SECKILL_RISK_RECORD": record, "SECKILL_RISK_NETWORKS": nets, "SECKILL_TRUSTED_PROXIES": "127.0.0.0/8"}}
	base, stop, err := startInProcess(ctx, c, stderr)
	if err != nil {
		return err
	}
	crowd := bench.RiskCrowd{Base: base, AdminToken: c.adminToken, Secret: c.secret, Params: bench.DrawRiskParams(*seed),
		Humans: *humans, Bots: *bots, Chromium: *chromium, Tabs: *tabs, Datacenter: genDatacenters}
	rep, err := crowd.Run(ctx, *span)
	stop() // the server's recording is flushed and closed
	if err != nil {
		return fmt.Errorf("risk gen: %w", err)
	}
	f, err := os.Open(record)
	if err != nil {
		return fmt.Errorf("risk gen: the recording: %w", err)
	}
	recs, err := risk.ReadRecords(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("risk gen: the recording: %w", err)
	}
	isBot := map[string]bool{}
	for _, u := range rep.Bots {
		isBot[u] = true
	}
	nBots, err := writeLabelled(*out, recs, isBot)
	if err != nil {
		return fmt.Errorf("risk gen: %w", err)
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(struct {
			bench.RiskReport
			Requests int `json:"requests"`
			BotReqs  int `json:"bot_requests"`
		}{rep, len(recs), nBots})
	}
	params, _ := json.Marshal(rep.Params)
	fmt.Fprintf(stdout, "crowd of seed %d: %s\n", *seed, params)
	for _, p := range []string{bench.ProfileHuman, bench.ProfileKeyboard, bench.ProfileScripted, bench.ProfileFarm, bench.ProfileHeadless, bench.ProfileReplay} {
		fmt.Fprintf(stdout, "  %-9s %5d accounts, %5d grabs\n", p, rep.Accounts[p], rep.Grabs[p])
	}
	if rep.PagesFailed > 0 {
		fmt.Fprintf(stdout, "  %d people's pages failed to click\n", rep.PagesFailed)
	}
	_, err = fmt.Fprintf(stdout, "recorded %d grabs: %d of a bot, %d of a person; written to %s\n", len(recs), nBots, len(recs)-nBots, *out)
	return err
}

func riskTrain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("risk train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the labelled requests to fit on: a JSON-lines `file` of {\"features\":{name:value,...},\"bot\":true|false}")
	out := fs.String("out", "", "where to write the model (`file`, JSON)")
	version := fs.String("version", "", "the model's version, written in the file (required)")
	l2 := fs.Float64("l2", 1e-3, "the ridge penalty on the weights")
	challenge := fs.Float64("challenge-at", risk.DefaultChallengeAt, "the score from which a request is challenged")
	block := fs.Float64("block-at", risk.DefaultBlockAt, "the score from which a request is blocked")
	balanced := fs.Bool("balanced", true, "weigh bots and people alike, whatever their counts in the file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || *version == "" || fs.NArg() > 0 {
		return errors.New("risk train: want --in FILE --out FILE --version V")
	}
	names, rows, bots, err := readLabelled(*in, nil)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := risk.FeatureIndex(n); !ok {
			return fmt.Errorf("risk train: %s: feature %q is not one a node computes (see docs/operating.md's list)", *in, n)
		}
	}
	m, err := risk.Fit(names, rows, bots, risk.FitOptions{Version: *version, L2: *l2, ChallengeAt: *challenge, BlockAt: *block,
		Balanced: *balanced})
	if err != nil {
		return fmt.Errorf("risk train: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("risk train: %w", err)
	}
	e, err := risk.Evaluate(m, rows, bots)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %s: %d features, fitted on %d requests (%d bots) in %d steps, log loss %.4f\n",
		m.Version, len(m.Features), m.Trained.Samples, m.Trained.Positives, m.Trained.Iterations, m.Trained.LogLoss)
	fmt.Fprintln(stdout, "on the training set (not a measure of the model: see risk eval on another):")
	return writeEvaluation(stdout, m, e)
}

func riskEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("risk eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "the model `file`")
	in := fs.String("in", "", "held-out labelled requests (`file`, JSON lines), not those it was fitted on")
	jsonOut := fs.Bool("json", false, "print the evaluation as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *in == "" || fs.NArg() > 0 {
		return errors.New("risk eval: want --model FILE --in FILE")
	}
	b, err := os.ReadFile(*model)
	if err != nil {
		return fmt.Errorf("risk eval: %w", err)
	}
	m, err := risk.ParseModel(b)
	if err != nil {
		return err
	}
	_, rows, bots, err := readLabelled(*in, m.Names())
	if err != nil {
		return err
	}
	e, err := risk.Evaluate(m, rows, bots)
	if err != nil {
		return err
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(e)
	}
	fmt.Fprintf(stdout, "model %s on %d held-out requests:\n", m.Version, e.Samples)
	return writeEvaluation(stdout, m, e)
}

func readLabelled(path string, names []string) ([]string, [][]float64, []bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	names, rows, bots, err := risk.ReadLabelled(f, names)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return names, rows, bots, nil
}

func writeEvaluation(w io.Writer, m *risk.Model, e risk.Evaluation) error {
	_, err := fmt.Fprintf(w, "  at challenge %.2f / block %.2f: precision %.4f, recall %.4f (bots challenged or blocked), humans challenged %.4f (%d blocked), ROC AUC %.4f\n"+
		"  confusion: %d bots caught, %d missed; %d humans challenged, %d allowed\n",
		m.ChallengeAt, m.BlockAt, e.Precision, e.Recall, e.HumansChallenged, e.HumansBlocked, e.AUC,
		e.TruePositives, e.FalseNegatives, e.FalsePositives, e.TrueNegatives)
	return err
}
