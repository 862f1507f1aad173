package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"seckill/internal/risk"
)

// riskCmd runs `seckill risk label|train|eval`: labelling a node's recording, fitting the risk
// model from labelled requests, and measuring one on requests it was not fitted on.
func riskCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("risk: want label, train or eval (seckill risk train -h)")
	}
	switch args[0] {
	case "label":
		return riskLabel(args[1:], stdout, stderr)
	case "train":
		return riskTrain(args[1:], stdout, stderr)
	case "eval":
		return riskEval(args[1:], stdout, stderr)
	}
	return fmt.Errorf("risk %q: want label, train or eval", args[0])
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
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	nBots := 0
	for i := range recs {
		bot := bots[recs[i].User]
		if bot {
			nBots++
		}
		recs[i].Bot = &bot
		if err := enc.Encode(recs[i]); err != nil {
			return err
		}
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("risk label: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "labelled %d requests: %d of a bot (%d accounts listed), %d of a person\n", len(recs), nBots, len(bots), len(recs)-nBots)
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
			return fmt.Errorf("risk train: %s: feature %q is not one a node computes (see the README's list)", *in, n)
		}
	}
	m, err := risk.Fit(names, rows, bots, risk.FitOptions{Version: *version, L2: *l2, ChallengeAt: *challenge, BlockAt: *block})
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
