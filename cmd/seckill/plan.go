package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"seckill/internal/bench"
	"seckill/internal/capacity"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// defaultResults is where scripts/bench/run.sh appends its result lines.
const defaultResults = "docs/bench/results.jsonl"

// planCmd runs `seckill plan`: it sizes a deployment for a sale from the costs the bench runs of
// a results file measured (see docs/CAPACITY.md).
func planCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	var fc forecastFlags
	fs.StringVar(&fc.activity, "activity", "", "plan for a reservation sale's forecast crowd: its `id` (with --url and --admin-token); the sale's flags above are the forecast's")
	fs.StringVar(&fc.url, "url", "", "with --activity: the base `URL` of a node")
	fs.StringVar(&fc.adminToken, "admin-token", getenv("SECKILL_ADMIN_TOKEN"), "with --activity: an admin `token` (a viewer's will do; SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&fc.patch, "patch", "", "with --activity: write the change to make to deploy/k8s before the sale to this `file` (default: print it after the plan)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("plan: unexpected arguments %q", fs.Args())
	}
	if fc.activity != "" || fc.url != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"results", "peak", "arrival", "clicks", "users", "stock", "per-user-limit", "kind", "shards"} {
			if set[name] {
				return fmt.Errorf("--%s: with --activity the sale is the activity's and its crowd the forecast's", name)
			}
		}
		fc.terms = s
		return planForecastCmd(ctx, fc, *jsonOut, stdout)
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
	runs, err := bench.ReadResults(f)
	if err != nil {
		return fmt.Errorf("--results %s: %w", *results, err)
	}
	costs, err := bench.CostsOf(runs, s.MinReplicas)
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

// forecastFlags are seckill plan --activity's.
type forecastFlags struct {
	activity, url, adminToken, patch string
	terms                            capacity.Sale // the cores, headroom, drain and replicas
}

// forecastAnswer is GET /api/admin/activities/{id}/forecast's body, its plan read back.
type forecastAnswer struct {
	wire.ForecastResponse
	Plan *capacity.Plan `json:"plan"`
}

// planForecastCmd runs seckill plan --activity: it asks the node for the sale's forecast and
// the plan for its peak, prints both, and the change to make to deploy/k8s before the sale.
func planForecastCmd(ctx context.Context, fc forecastFlags, jsonOut bool, stdout io.Writer) error {
	switch {
	case fc.activity == "" || fc.url == "":
		return errors.New("--activity and --url go together: the reservation sale and the node that knows it")
	case fc.adminToken == "":
		return errors.New("--activity needs --admin-token (or SECKILL_ADMIN_TOKEN)")
	}
	base, err := url.Parse(strings.TrimSuffix(fc.url, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host:port", fc.url)
	}
	q := url.Values{"cores": {strconv.Itoa(fc.terms.Cores)}, "headroom": {strconv.FormatFloat(fc.terms.Headroom, 'g', -1, 64)},
		"drain": {fc.terms.Drain.String()}, "min_replicas": {strconv.Itoa(fc.terms.MinReplicas)}}
	u := base.String() + "/api/admin/activities/" + url.PathEscape(fc.activity) + "/forecast?" + q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+fc.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the forecast: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("the forecast: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the forecast: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var f forecastAnswer
	if err := json.Unmarshal(body, &f); err != nil {
		return fmt.Errorf("the forecast's answer: %w", err)
	}
	if f.Plan == nil {
		return fmt.Errorf("the node planned nothing for %s: %s", fc.activity, f.PlanError)
	}
	if jsonOut {
		_, err := stdout.Write(append(body, '\n'))
		return err
	}
	m := f.Model
	basis := fmt.Sprintf("fitted from the shop's last %d reservation sales", m.Sales)
	if f.Basis != "history" {
		basis = "the prior: fewer than 3 reservation sales archived"
	}
	fmt.Fprintf(stdout, "Activity %s: %d reserved. Expected %d buyers (%.2f a reservation), %d clicks (%.2f a buyer), a peak of %g requests a second (the busiest second %.2f times a wave's mean): %s.\n\n",
		f.ActivityID, f.Reserved, f.ExpectedBuyers, m.BuyersPerReservation, f.ExpectedClicks, m.ClicksPerBuyer, f.ExpectedPeakRPS,
		m.PeakFactor, basis)
	if err := f.Plan.WriteText(stdout); err != nil {
		return err
	}
	patch, err := k8sPatch(fc.activity, *f.Plan)
	if err != nil {
		return err
	}
	if fc.patch != "" {
		if err := os.WriteFile(fc.patch, patch, 0o644); err != nil {
			return fmt.Errorf("--patch: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "\nThe change to deploy/k8s for the sale is in %s.\n", fc.patch)
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nThe change to deploy/k8s for the sale:\n\n%s", patch)
	return err
}

// The names deploy/k8s gives the API's Deployment and autoscaler and the workers' Deployment,
// and the autoscaler's maximum there.
const (
	k8sAPI       = "seckill-api"
	k8sWorker    = "seckill-worker"
	k8sMaxAPIHPA = 30
)

// k8sPatch is the change to make to deploy/k8s before activity's sale for plan p: the API's
// replicas and its autoscaler's minimum at the plan's API nodes (its maximum raised to them if
// below), the workers' replicas at its worker nodes. Each document is a partial object for
// kubectl apply --server-side (or kubectl patch, one at a time); after the sale, apply
// deploy/k8s again.
func k8sPatch(activity string, p capacity.Plan) ([]byte, error) {
	type meta struct {
		Name string `json:"name"`
	}
	type doc struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   meta           `json:"metadata"`
		Spec       map[string]int `json:"spec"`
	}
	docs := []doc{
		{"apps/v1", "Deployment", meta{k8sAPI}, map[string]int{"replicas": p.APINodes}},
		{"autoscaling/v2", "HorizontalPodAutoscaler", meta{k8sAPI}, map[string]int{"minReplicas": p.APINodes, "maxReplicas": max(p.APINodes, k8sMaxAPIHPA)}},
		{"apps/v1", "Deployment", meta{k8sWorker}, map[string]int{"replicas": p.WorkerNodes}},
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# seckill plan --activity %s: apply before the sale starts with\n#   kubectl apply --server-side --field-manager=seckill-plan --force-conflicts -f FILE\n# and apply deploy/k8s again once it is over.\n", activity)
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}
