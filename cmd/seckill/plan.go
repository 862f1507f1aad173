package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"seckill/internal/capacity"
	"seckill/internal/sale"
)

// defaultResults is where scripts/bench/run.sh appends its result lines.
const defaultResults = "docs/bench/results.jsonl"

// planCmd runs `seckill plan`: it sizes a deployment for a sale from the costs the bench runs of
// a results file measured (see docs/CAPACITY.md).
func planCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := capacity.Sale{Kind: sale.KindItem}
	results := fs.String("results", defaultResults, "the bench result lines to take the costs from (scripts/bench/run.sh capacity- writes them)")
	fs.Float64Var(&s.Peak, "peak", 0, "grab requests a second at the peak that reach the service (after any CDN or WAF); or --arrival")
	arrival := fs.String("arrival", "burst", "the peak's shape: burst (at --peak) or ramp:DURATION (the users' --clicks spread evenly over it, as bench's)")
	fs.Float64Var(&s.Clicks, "clicks", 1, "with --arrival ramp: clicks per user")
	fs.Int64Var(&s.Users, "users", 0, "users in the crowd (default: as many as the peak's requests a second)")
	fs.Int64Var(&s.Stock, "stock", 0, "units on sale (shares of a red packet)")
	fs.Int64Var(&s.PerUser, "per-user-limit", 1, "units one user may buy")
	kind := fs.String("kind", string(sale.KindItem), "item or redpacket")
	fs.DurationVar(&s.Drain, "drain", time.Minute, "how long after the sell-out the workers may take to place the last order (0: as fast as the wins come)")
	fs.IntVar(&s.Cores, "cores", 8, "cores of a node")
	fs.Float64Var(&s.Headroom, "headroom", 0.6, "the share of a node's CPU to plan to use at the peak")
	fs.IntVar(&s.MinReplicas, "min-replicas", 0, "SECKILL_REDIS_MIN_REPLICAS: take the costs of runs measured with it")
	fs.Int64Var(&s.Shards, "shards", 0, "the hot item's stock shards (0: the plan decides)")
	jsonOut := fs.Bool("json", false, "print the plan as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("plan: unexpected arguments %q", fs.Args())
	}
	s.Kind = sale.Kind(*kind)
	switch {
	case *arrival == "burst":
	case strings.HasPrefix(*arrival, "ramp:"):
		d, err := time.ParseDuration(strings.TrimPrefix(*arrival, "ramp:"))
		if err != nil || d <= 0 {
			return fmt.Errorf("--arrival %q: want ramp:DURATION such as ramp:10m", *arrival)
		}
		if s.Users == 0 {
			return errors.New("--arrival ramp: needs --users: the crowd the ramp spreads")
		}
		s.Ramp = d
	default:
		return fmt.Errorf("--arrival %q: want burst or ramp:DURATION", *arrival)
	}
	if s.Users == 0 {
		s.Users = int64(s.Peak)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	f, err := os.Open(*results)
	if errors.Is(err, os.ErrNotExist) && *results == defaultResults {
		return fmt.Errorf("--results: %s is not here: run seckill plan from the repository, or give the file scripts/bench/run.sh capacity- wrote", defaultResults)
	}
	if err != nil {
		return fmt.Errorf("--results: %w", err)
	}
	defer f.Close()
	runs, err := capacity.ReadRuns(f)
	if err != nil {
		return fmt.Errorf("--results %s: %w", *results, err)
	}
	costs, err := capacity.CostsOf(runs, s.MinReplicas)
	if err != nil {
		return fmt.Errorf("--results %s: %w", *results, err)
	}
	p, err := capacity.Size(s, costs)
	if err != nil {
		return err
	}
	if *jsonOut {
		return p.WriteJSON(stdout)
	}
	return p.WriteText(stdout)
}
