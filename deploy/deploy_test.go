package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The deployment files are checked here against the binary itself, built as the Dockerfile
// builds it: every node's environment goes through seckill check (the settings table's parsing,
// and no SECKILL_* variable it does not read), whose answer says the node's role, address and
// graces. No container engine or cluster runs here; what can be checked without one is.

const deployDir = "."

// image is the image the deployment files run.
const image = "seckill:latest"

// node is what seckill check says of a node's environment.
type node struct {
	Role           string   `json:"role"`
	Addr           string   `json:"addr"`
	MetricsAddr    string   `json:"metrics_addr"`
	DB             string   `json:"db"`
	Redis          string   `json:"redis"`
	Demo           bool     `json:"demo"`
	TrustedProxies []string `json:"trusted_proxies"`
	ShutdownGraceS float64  `json:"shutdown_grace_s"`
	FailoverGraceS float64  `json:"failover_grace_s"`
}

func (n node) shutdownGrace() time.Duration {
	return time.Duration(n.ShutdownGraceS * float64(time.Second))
}
func (n node) failoverGrace() time.Duration {
	return time.Duration(n.FailoverGraceS * float64(time.Second))
}

// nodeEnv runs seckill check with env, and nothing else, as the node's environment: the binary
// must take it (every variable one it reads, every value one it parses) as a distributed node
// of role.
func nodeEnv(t *testing.T, where string, env map[string]string, role string) node {
	t.Helper()
	cmd := exec.Command(binary(t), "check")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: the binary refuses this environment: %v\n%s", where, err, errs.String())
	}
	var n node
	if err := json.Unmarshal(out.Bytes(), &n); err != nil {
		t.Fatalf("%s: seckill check printed %q: %v", where, out.String(), err)
	}
	if n.Role != role || n.Redis == "" || strings.HasPrefix(n.DB, "sqlite:") || n.Demo {
		t.Errorf("%s: role %q, redis %q, db %q, demo %v; want a distributed %s node", where, n.Role, n.Redis, n.DB, n.Demo, role)
	}
	return n
}

// metricsPort is the port of the node's metrics listener, which the deployment's Prometheus
// must reach: not loopback, and not the API's port.
func metricsPort(t *testing.T, where string, n node) string {
	t.Helper()
	host, port, err := net.SplitHostPort(n.MetricsAddr)
	if err != nil {
		t.Fatalf("%s: metrics address %q: %v", where, n.MetricsAddr, err)
	}
	if ip, err := netip.ParseAddr(host); host == "localhost" || err == nil && ip.IsLoopback() {
		t.Errorf("%s: the metrics listen on %s, loopback: Prometheus cannot scrape them", where, n.MetricsAddr)
	}
	if port == portOf(t, n.Addr) {
		t.Errorf("%s: the metrics and the API share the port %s", where, port)
	}
	return port
}

// portOf is the port of a listen address.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return port
}

// decodeAs is one YAML document decoded strictly as a T.
func decodeAs[T any](t *testing.T, where string, doc []byte) T {
	t.Helper()
	var v T
	strictYAML(t, where, doc, &v)
	return v
}

// strictYAML decodes one YAML document into v, refusing a field v does not have.
func strictYAML(t *testing.T, where string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// TestKubernetesManifests decodes every manifest strictly into the Kubernetes API's own types
// and checks them against the binary: the environment parses, the probes ask /readyz and
// /healthz on the port the node listens on, the pod is given longer to stop than the node
// takes, Prometheus is pointed at the metrics' own port (SECKILL_METRICS_ADDR's), which no
// Service routes to, and the Service, the disruption budget and the autoscaler select the
// API's pods.
func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(deployDir, "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	var (
		deployments []appsv1.Deployment
		services    []corev1.Service
		budgets     []policyv1.PodDisruptionBudget
		scalers     []autoscalingv2.HorizontalPodAutoscaler
		config      = map[string]map[string]string{} // ConfigMap or Secret name -> its data
	)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			where := fmt.Sprintf("%s, document %d", filepath.Base(f), i+1)
			var tm metav1.TypeMeta // which type to decode the document into, strictly
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				deployments = append(deployments, decodeAs[appsv1.Deployment](t, where, doc))
			case "v1 Service":
				services = append(services, decodeAs[corev1.Service](t, where, doc))
			case "policy/v1 PodDisruptionBudget":
				budgets = append(budgets, decodeAs[policyv1.PodDisruptionBudget](t, where, doc))
			case "autoscaling/v2 HorizontalPodAutoscaler":
				scalers = append(scalers, decodeAs[autoscalingv2.HorizontalPodAutoscaler](t, where, doc))
			case "v1 ConfigMap":
				c := decodeAs[corev1.ConfigMap](t, where, doc)
				config["ConfigMap/"+c.Name] = c.Data
			case "v1 Secret":
				s := decodeAs[corev1.Secret](t, where, doc)
				config["Secret/"+s.Name] = s.StringData
			default:
				t.Fatalf("%s: a %s %s, which this test does not know", where, tm.APIVersion, tm.Kind)
			}
		}
	}

	roles := map[string]*appsv1.Deployment{}
	metricsPorts := map[string]bool{} // the metrics ports of the pods, which no Service may route to
	for i := range deployments {
		d := &deployments[i]
		where := "Deployment " + d.Name
		spec := d.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want the one seckill", where, len(spec.Containers))
		}
		c := spec.Containers[0]
		if c.Image != image {
			t.Errorf("%s: image %q, want %q (the Dockerfile's)", where, c.Image, image)
		}
		env := map[string]string{}
		for _, from := range c.EnvFrom {
			var data map[string]string
			switch {
			case from.ConfigMapRef != nil:
				data = config["ConfigMap/"+from.ConfigMapRef.Name]
			case from.SecretRef != nil:
				data = config["Secret/"+from.SecretRef.Name]
			}
			if data == nil {
				t.Fatalf("%s: envFrom names a ConfigMap or Secret that deploy/k8s does not hold", where)
			}
			for k, v := range data {
				env[k] = v
			}
		}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		role := d.Labels["app.kubernetes.io/component"]
		cfg := nodeEnv(t, where, env, role)
		roles[role] = d

		port := portOf(t, cfg.Addr)
		named := map[string]string{}
		for _, p := range c.Ports {
			named[p.Name] = fmt.Sprint(p.ContainerPort)
		}
		// Prometheus scrapes the metrics' own listener, the port the pod names "metrics".
		mport := metricsPort(t, where, cfg)
		metricsPorts[named["metrics"]] = true
		ann := d.Spec.Template.Annotations
		if named["metrics"] != mport || ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != mport ||
			ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: the metrics port %q and the annotations %v, want Prometheus to scrape /metrics on SECKILL_METRICS_ADDR's port %s",
				where, named["metrics"], ann, mport)
		}
		for name, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[name]
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || named[probe.HTTPGet.Port.String()] != port {
				t.Errorf("%s: the %s probe %+v, want GET %s on the node's port %s", where, name, probe, want, port)
			}
		}
		if probe := c.ReadinessProbe; probe != nil &&
			time.Duration(probe.PeriodSeconds*probe.FailureThreshold)*time.Second <= cfg.failoverGrace() {
			t.Errorf("%s: the readiness probe gives up after %d s, within SECKILL_FAILOVER_GRACE: a Redis failover would take every pod out at once",
				where, probe.PeriodSeconds*probe.FailureThreshold)
		}
		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		grace := time.Duration(-1)
		if g := spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if grace < preStop+cfg.shutdownGrace()+5*time.Second {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want at least the preStop %v + the node's %v drain + 5 s", where, grace, preStop, cfg.shutdownGrace())
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no CPU or memory request", where)
		}
		sc, psc := c.SecurityContext, spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || sc == nil || sc.ReadOnlyRootFilesystem == nil ||
			!*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: want a non-root pod, a read-only root filesystem and no privilege escalation", where)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: its selector does not select its own pods (%v)", where, err)
		}
	}
	api, worker := roles["api"], roles["worker"]
	if api == nil || worker == nil {
		t.Fatalf("want an API and a worker Deployment, got roles %v", slices.Collect(mapKeys(roles)))
	}
	podsOf := func(sel *metav1.LabelSelector) []string {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range deployments {
			if s.Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, d.Name)
			}
		}
		return out
	}
	if len(services) != 1 || !slices.Equal(podsOf(&metav1.LabelSelector{MatchLabels: services[0].Spec.Selector}), []string{api.Name}) ||
		services[0].Spec.Ports[0].TargetPort.String() != api.Spec.Template.Spec.Containers[0].Ports[0].Name {
		t.Errorf("want one Service, to the API pods' named port: %+v", services)
	}
	for _, s := range services {
		for _, p := range s.Spec.Ports {
			if metricsPorts[p.TargetPort.String()] || p.TargetPort.String() == "metrics" {
				t.Errorf("Service %s routes to the metrics port %s: the metrics are not the public's", s.Name, p.TargetPort.String())
			}
		}
	}
	budgeted := map[string]bool{}
	for _, b := range budgets {
		for _, d := range podsOf(b.Spec.Selector) {
			budgeted[d] = true
		}
		if b.Spec.MinAvailable != nil && slices.Equal(podsOf(b.Spec.Selector), []string{api.Name}) &&
			b.Spec.MinAvailable.IntValue() >= int(*api.Spec.Replicas) {
			t.Errorf("PodDisruptionBudget %s: minAvailable %s of %d replicas lets no node drain", b.Name, b.Spec.MinAvailable, *api.Spec.Replicas)
		}
	}
	if !budgeted[api.Name] || !budgeted[worker.Name] {
		t.Errorf("disruption budgets cover %v, want both Deployments", budgeted)
	}
	if len(scalers) != 1 || scalers[0].Spec.ScaleTargetRef.Name != api.Name || scalers[0].Spec.ScaleTargetRef.Kind != "Deployment" ||
		*scalers[0].Spec.MinReplicas < *api.Spec.Replicas {
		t.Errorf("want one autoscaler of the API Deployment, from its replicas up: %+v", scalers)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// composeFile is the part of the Compose specification deploy/compose.yaml uses: decoded
// strictly, a key it misspells fails.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `json:"subnet"`
			} `json:"config"`
		} `json:"ipam"`
	} `json:"networks"`
	Volumes map[string]any `json:"volumes"`
}

type composeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	Command         []string          `json:"command"`
	Environment     map[string]string `json:"environment"`
	Ports           []string          `json:"ports"`
	Expose          []string          `json:"expose"`
	Volumes         []string          `json:"volumes"`
	Networks        any               `json:"networks"`
	DependsOn       any               `json:"depends_on"`
	Restart         string            `json:"restart"`
	StopGracePeriod string            `json:"stop_grace_period"`
	Healthcheck     *struct {
		Test        []string `json:"test"`
		Interval    string   `json:"interval"`
		Timeout     string   `json:"timeout"`
		StartPeriod string   `json:"start_period"`
		Retries     int      `json:"retries"`
	} `json:"healthcheck"`
}

// interpolate replaces compose's ${VAR:?message} and ${VAR:-default} with env's values.
var interpolation = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?::([?-])([^}]*))?\}`)

// TestComposeFile decodes deploy/compose.yaml strictly and checks it against the binary: every
// seckill service's environment (with deploy/.env.example's values) parses into a distributed
// node, three API nodes and a worker, exposed on the port they listen on and given longer to
// stop than they take; the Redis seeds are the cluster's servers, the load balancer is the one
// trusted proxy and does not pass /metrics, and Prometheus scrapes every node with the shipped
// rules on its metrics listener (SECKILL_METRICS_ADDR's port, apart from the API's).
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := map[string]string{}
	envFile, err := os.ReadFile(filepath.Join(deployDir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(envFile), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			example[k] = v
		}
	}
	var missing []string
	raw = interpolation.ReplaceAllFunc(raw, func(m []byte) []byte {
		g := interpolation.FindSubmatch(m)
		v, ok := example[string(g[1])]
		switch {
		case ok:
			return []byte(v)
		case string(g[2]) == "-":
			return g[3]
		}
		missing = append(missing, string(g[1]))
		return nil
	})
	if len(missing) > 0 {
		t.Fatalf("compose.yaml needs %v, which deploy/.env.example does not give", missing)
	}
	// The x- keys are anchors for the services to merge; the rest is decoded strictly.
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		if strings.HasPrefix(k, "x-") {
			delete(top, k)
		}
	}
	clean, err := yaml.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	strictYAML(t, "compose.yaml", clean, &cf)

	addrOf := func(name string) string {
		nets, _ := cf.Services[name].Networks.(map[string]any)
		sale, _ := nets["sale"].(map[string]any)
		ip, _ := sale["ipv4_address"].(string)
		return ip
	}
	var nodes, apis []string
	roles := map[string]int{}
	var nodePort, scrapePort string
	for name, s := range cf.Services {
		if s.Image == "" {
			t.Errorf("service %s has no image", name)
		}
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(deployDir, src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
		if s.Image != image {
			continue
		}
		where := "service " + name
		c := nodeEnv(t, where, s.Environment, s.Environment["SECKILL_ROLE"])
		roles[c.Role]++
		nodes = append(nodes, name)
		if c.Role == "api" {
			apis = append(apis, name)
		}
		nodePort = portOf(t, c.Addr)
		if !slices.Contains(s.Expose, nodePort) {
			t.Errorf("%s exposes %v, and the node listens on %s", where, s.Expose, nodePort)
		}
		scrapePort = metricsPort(t, where, c)
		if !slices.Contains(s.Expose, scrapePort) {
			t.Errorf("%s exposes %v, and the node serves its metrics on %s", where, s.Expose, scrapePort)
		}
		if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s: want it built from deploy/Dockerfile", where)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d < c.shutdownGrace()+5*time.Second {
			t.Errorf("%s: stop_grace_period %q, want at least the node's %v drain + 5 s", where, s.StopGracePeriod, c.shutdownGrace())
		}
		if hc := s.Healthcheck; hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" || hc.Test[1] != "/seckill" || hc.Test[2] != "probe" {
			t.Errorf("%s: the health check %+v, want the binary's own probe", where, hc)
		} else {
			probeTakes(t, where, hc.Test[3:])
		}
		var seeds []string
		for _, s := range strings.Split(c.Redis, ",") {
			seeds = append(seeds, strings.TrimPrefix(s, "redis://"))
		}
		var servers []string
		for n := range cf.Services {
			if strings.HasPrefix(n, "redis-") && n != "redis-cluster" {
				servers = append(servers, addrOf(n)+":6379")
			}
		}
		slices.Sort(seeds)
		slices.Sort(servers)
		if !slices.Equal(seeds, servers) || !strings.Contains(strings.Join(cf.Services["redis-cluster"].Command, " "), strings.Join(servers, " ")) {
			t.Errorf("%s: Redis seeds %v, the cluster's servers %v (joined by redis-cluster)", where, seeds, servers)
		}
		lb := netip.MustParseAddr(addrOf("lb"))
		if len(c.TrustedProxies) != 1 || !netip.MustParsePrefix(c.TrustedProxies[0]).Contains(lb) {
			t.Errorf("%s: trusted proxies %v, want the load balancer %v alone", where, c.TrustedProxies, lb)
		}
	}
	if roles["api"] != 3 || roles["worker"] != 1 {
		t.Errorf("compose runs roles %v, want three API nodes and a worker", roles)
	}

	nginx, err := os.ReadFile(filepath.Join(deployDir, "compose", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var upstream []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server ([\w.-]+:\d+)`).FindAllSubmatch(nginx, -1) {
		upstream = append(upstream, string(m[1]))
	}
	var wantUp []string
	for _, a := range apis {
		wantUp = append(wantUp, a+":"+nodePort)
	}
	slices.Sort(upstream)
	slices.Sort(wantUp)
	if !slices.Equal(upstream, wantUp) {
		t.Errorf("nginx.conf sends to %v, want the API nodes %v", upstream, wantUp)
	}
	// The door does not pass /metrics: it answers it itself, before any node is asked.
	if m := regexp.MustCompile(`(?s)location\s*=\s*/metrics\s*\{([^}]*)\}`).FindSubmatch(nginx); m == nil ||
		!regexp.MustCompile(`(?m)^\s*return\s+404\s*;`).Match(m[1]) || strings.Contains(string(m[1]), "proxy_pass") {
		t.Errorf("nginx.conf has no `location = /metrics { return 404; }`: the load balancer would pass /metrics to the nodes")
	}
	if strings.Contains(string(nginx), ":"+scrapePort) {
		t.Errorf("nginx.conf names the metrics port %s: the load balancer must not reach the metrics", scrapePort)
	}

	var prom struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	promFile := filepath.Join(deployDir, "compose", "prometheus.yml")
	promRaw, err := os.ReadFile(promFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(promRaw, &prom); err != nil {
		t.Fatal(err)
	}
	// Prometheus scrapes every node on its metrics listener: SECKILL_METRICS_ADDR's port.
	var scraped, wantScraped []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "/metrics" {
			t.Errorf("Prometheus scrapes %q, want /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			scraped = append(scraped, st.Targets...)
		}
	}
	for _, n := range nodes {
		wantScraped = append(wantScraped, n+":"+scrapePort)
	}
	slices.Sort(scraped)
	slices.Sort(wantScraped)
	if !slices.Equal(scraped, wantScraped) || len(prom.RuleFiles) != 1 {
		t.Errorf("Prometheus scrapes %v with rules %v, want every node %v and the shipped rules", scraped, prom.RuleFiles, wantScraped)
	}
	if !slices.Contains(cf.Services["prometheus"].Volumes, "../docs/grafana/alerts.yml:"+prom.RuleFiles[0]+":ro") {
		t.Errorf("Prometheus reads its rules from %s, which is not the shipped docs/grafana/alerts.yml", prom.RuleFiles[0])
	}
	// promtool checks the configuration, with the rules' path as it is on this machine.
	local := filepath.Join(t.TempDir(), "prometheus.yml")
	abs, _ := filepath.Abs("../docs/grafana/alerts.yml")
	os.WriteFile(local, bytes.ReplaceAll(promRaw, []byte(prom.RuleFiles[0]), []byte(abs)), 0o644)
	if out, err := exec.Command("promtool", "check", "config", local).CombinedOutput(); err != nil {
		t.Errorf("promtool check config (deploy/compose/prometheus.yml): %v\n%s", err, out)
	}
}

// TestDockerfile: the image runs the binary as a non-root user on a distroless base, checks
// its health with the binary's probe, and listens (the API, and apart the metrics) and keeps its
// SQLite file where the settings say. (TestReleaseBuildLeavesTheLabOut builds the binary with the Dockerfile's own command.)
func TestDockerfile(t *testing.T) {
	df := dockerfile(t)
	last := df["FROM"][len(df["FROM"])-1]
	if !strings.HasPrefix(last, "gcr.io/distroless/static") || !strings.HasSuffix(last, ":nonroot") {
		t.Errorf("the image's base is %q, want distroless static, nonroot", last)
	}
	if u := df["USER"]; len(u) != 1 || strings.HasPrefix(u[0], "0") || u[0] == "root" {
		t.Errorf("USER %v, want a non-root user", u)
	}
	if hc := df["HEALTHCHECK"]; len(hc) != 1 || !strings.HasSuffix(hc[0], `CMD ["/seckill", "probe"]`) {
		t.Errorf("HEALTHCHECK %v, want the binary's probe", hc)
	}
	env := map[string]string{}
	for _, e := range df["ENV"] {
		for _, kv := range strings.Fields(strings.ReplaceAll(e, `\`, " ")) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	cmd := exec.Command(binary(t), "check")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	var c node
	if err == nil {
		err = json.Unmarshal(out, &c)
	}
	if err != nil {
		t.Fatalf("seckill check with the image's ENV %v: %v %s", env, err, out)
	}
	if ex := df["EXPOSE"]; len(ex) != 1 || !slices.Equal(strings.Fields(ex[0]), []string{portOf(t, c.Addr), metricsPort(t, "the image", c)}) {
		t.Errorf("EXPOSE %v, and the node listens on %s, its metrics on %s", ex, c.Addr, c.MetricsAddr)
	}
	if v := df["VOLUME"]; len(v) != 1 || !strings.HasPrefix(c.DB, "sqlite:"+strings.Trim(v[0], `["]`)+"/") {
		t.Errorf("VOLUME %v, and the database is %s", v, c.DB)
	}
}

// dockerfile reads deploy/Dockerfile's instructions, continued lines joined.
func dockerfile(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, arg, _ := strings.Cut(line, " ")
		out[op] = append(out[op], strings.TrimSpace(arg))
	}
	return out
}
