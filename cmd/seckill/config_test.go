package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi"

	"seckill/internal/node"

	"seckill/internal/e2etest"
)

// operatingDoc returns the section "## heading" of docs/operating.md, the operator's document.
func operatingDoc(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/operating.md has no %s section", heading)
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	return text
}

// TestOperatingDocListsEverySetting holds docs/operating.md's configuration table against
// serve's settings table: every setting has its row with its flag, its environment variable and
// its default, and every row is a setting.
func TestOperatingDocListsEverySetting(t *testing.T) {
	text := operatingDoc(t, "Configuration")
	row := regexp.MustCompile("(?m)^\\| `-([a-z0-9-]+)` \\| `?([A-Z0-9_]*)`? \\|.*\\| ([^|]*) \\|$")
	rows := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		rows[m[1]] = m[2:]
	}
	table := settings(&config{})
	for _, s := range table {
		r, ok := rows[s.flag]
		if !ok {
			t.Errorf("docs/operating.md's configuration table has no row for -%s (%s)", s.flag, s.env)
			continue
		}
		if r[0] != s.env {
			t.Errorf("docs/operating.md: -%s has the variable %q, the binary reads %s", s.flag, r[0], s.env)
		}
		def := strings.TrimSpace(r[1])
		if strings.HasPrefix(def, "`") && def != "`"+s.def+"`" {
			t.Errorf("docs/operating.md: -%s defaults to %s, the binary to %q", s.flag, def, s.def)
		}
		if s.def == "" && strings.HasPrefix(def, "`") {
			t.Errorf("docs/operating.md: -%s defaults to %s, the binary to nothing", s.flag, def)
		}
		delete(rows, s.flag)
	}
	for flag := range rows {
		t.Errorf("docs/operating.md lists -%s, which serve does not have", flag)
	}
	if len(table) < 25 {
		t.Fatalf("the settings table has %d settings: the document's rows were not all read", len(table))
	}
}

// TestOperatingDocListsEveryCommand holds docs/operating.md's commands table against the
// binary's usage: every command has its row, and every row is a command.
func TestOperatingDocListsEveryCommand(t *testing.T) {
	_, commands, ok := strings.Cut(usage, "Commands:\n")
	if !ok {
		t.Fatalf("the usage has no Commands: list:\n%s", usage)
	}
	want := regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllStringSubmatch(commands, -1)
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)` \\|").FindAllStringSubmatch(operatingDoc(t, "Commands"), -1) {
		rows[m[1]] = true
	}
	for _, m := range want {
		if !rows[m[1]] {
			t.Errorf("docs/operating.md's commands table has no row for %s", m[1])
		}
		delete(rows, m[1])
	}
	for cmd := range rows {
		t.Errorf("docs/operating.md lists the command %s, which the binary does not have", cmd)
	}
	if len(want) < 7 {
		t.Fatalf("the usage lists %d commands: they were not all read", len(want))
	}
}

// TestEverySettingHasItsVariable: each setting's environment variable sets it, and its flag wins
// over the variable. The sweeper's period is the one that lacked a variable.
func TestEverySettingHasItsVariable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings(&config{}) {
		if !strings.HasPrefix(s.env, "SECKILL_") || seen[s.env] || seen[s.flag] {
			t.Errorf("setting -%s: variable %q missing, or a name used twice", s.flag, s.env)
		}
		seen[s.env], seen[s.flag] = true, true
	}
	env := map[string]string{"SECKILL_SWEEP_EVERY": "250ms", "SECKILL_RATE_USER": "9"}
	c, err := parseServe(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.SweepEvery != 250*time.Millisecond || c.API.Rates.User != 9 {
		t.Fatalf("sweep every %v, user rate %d: want the variables' 250ms and 9", c.SweepEvery, c.API.Rates.User)
	}
	if c, err = parseServe([]string{"-sweep-every", "2s"}, env, io.Discard); err != nil || c.SweepEvery != 2*time.Second {
		t.Fatalf("-sweep-every 2s with SECKILL_SWEEP_EVERY=250ms: %v, %v; want the flag's 2s", c.SweepEvery, err)
	}
	env["SECKILL_SWEEP_EVERY"] = "0s"
	if _, err := parseServe(nil, env, io.Discard); err == nil || !strings.Contains(err.Error(), `SECKILL_SWEEP_EVERY="0s" (-sweep-every): want a positive duration`) {
		t.Fatalf("SECKILL_SWEEP_EVERY=0s: %v; want it refused, naming the variable", err)
	}
	c, err = parseServe(nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.SweepEvery != time.Second || c.Role != node.RoleAll || !c.demo || c.ReconcileEvery != time.Hour || c.GateLimits.FailRate != 0.05 {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestAdminTokensSetting: SECKILL_ADMIN_TOKENS gives each admin its name, role and token.
func TestAdminTokensSetting(t *testing.T) {
	env := map[string]string{"SECKILL_ADMIN_TOKENS": " grafana:viewer:0123456789abcdef , carol:operator:fedcba9876543210fedc"}
	c, err := parseServe(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: "0123456789abcdef"},
		{Name: "carol", Role: httpapi.RoleOperator, Token: "fedcba9876543210fedc"}}
	if !slices.Equal(c.API.Admins, want) {
		t.Fatalf("admins %+v, want %+v", c.API.Admins, want)
	}
}

// TestEventsKeepSetting: the delivered order events are kept a week by default, for ever with 0,
// and never less than a second (a purge every nanosecond).
func TestEventsKeepSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 7 * 24 * time.Hour, "0": 0, "36h": 36 * time.Hour} {
		c, err := parseServe(nil, map[string]string{"SECKILL_EVENTS_KEEP": v}, io.Discard)
		if err != nil || c.EventsKeep != want {
			t.Errorf("SECKILL_EVENTS_KEEP=%q: %v, %v; want %v", v, c.EventsKeep, err, want)
		}
	}
	if _, err := parseServe([]string{"-events-keep", "500ms"}, nil, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "SECKILL_EVENTS_KEEP") {
		t.Errorf("-events-keep 500ms: %v; want it refused, naming the variable", err)
	}
}

// TestDBConnsSetting: a node keeps 16 connections to its database at most unless told another
// number from 1 to 1000; anything else is refused, naming the variable.
func TestDBConnsSetting(t *testing.T) {
	for v, want := range map[string]int{"": 16, "1": 1, "64": 64, "1000": 1000} {
		c, err := parseServe(nil, map[string]string{"SECKILL_DB_CONNS": v}, io.Discard)
		if err != nil || c.DBConns != want {
			t.Errorf("SECKILL_DB_CONNS=%q: %v, %v; want %d", v, c.DBConns, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "1001", "x"} {
		if _, err := parseServe([]string{"-db-conns", bad}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "SECKILL_DB_CONNS") {
			t.Errorf("-db-conns %s: %v; want it refused, naming the variable", bad, err)
		}
	}
}

// TestLabRedisViaSetting: a development build reads SECKILL_LAB_REDIS_VIA's routes, one a
// server, and refuses a pair that is not two host:ports, a server routed twice, and routes
// without a Redis to route to, naming the variable.
func TestLabRedisViaSetting(t *testing.T) {
	redis := "redis://127.0.0.1:7000,127.0.0.1:7001"
	c, err := parseServe(nil, map[string]string{"SECKILL_REDIS": redis,
		"SECKILL_LAB_REDIS_VIA": "127.0.0.1:7000=127.0.0.1:41000,127.0.0.1:7001=127.0.0.1:41001"}, io.Discard)
	if want := map[string]string{"127.0.0.1:7000": "127.0.0.1:41000", "127.0.0.1:7001": "127.0.0.1:41001"}; err != nil ||
		!maps.Equal(c.RedisVia, want) {
		t.Fatalf("routes %v, %v; want %v", c.RedisVia, err, want)
	}
	if c, err := parseServe(nil, map[string]string{"SECKILL_REDIS": redis}, io.Discard); err != nil || c.RedisVia != nil {
		t.Fatalf("no routes: %v, %v", c.RedisVia, err)
	}
	for _, v := range []string{"127.0.0.1:7000", "127.0.0.1:7000=", "=127.0.0.1:41000", "127.0.0.1:7000=127.0.0.1",
		"127.0.0.1:7000=127.0.0.1:0", "127.0.0.1:7000=127.0.0.1:41000,127.0.0.1:7000=127.0.0.1:41001", ":7000=127.0.0.1:41000"} {
		if _, err := parseServe(nil, map[string]string{"SECKILL_REDIS": redis, "SECKILL_LAB_REDIS_VIA": v}, io.Discard); err == nil ||
			!strings.Contains(err.Error(), "SECKILL_LAB_REDIS_VIA") {
			t.Errorf("SECKILL_LAB_REDIS_VIA=%q: %v; want it refused, naming the variable", v, err)
		}
	}
	if _, err := parseServe(nil, map[string]string{"SECKILL_LAB_REDIS_VIA": "127.0.0.1:7000=127.0.0.1:41000"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "needs SECKILL_REDIS") {
		t.Errorf("routes without SECKILL_REDIS: %v; want them refused", err)
	}
}

// TestServeRefusesAnUnknownSetting: serve, the default command, refuses to start on a SECKILL_*
// variable it does not read, naming the setting it is a typo of. SECKILL_JWT_SECRT once started
// a node on a random secret with the demo login on: anyone could sign in as anyone.
func TestServeRefusesAnUnknownSetting(t *testing.T) {
	t.Chdir(t.TempDir())
	const typo = "unknown setting SECKILL_JWT_SECRT: did you mean SECKILL_JWT_SECRET?"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"serve by default", nil, map[string]string{"SECKILL_JWT_SECRT": testSecret}, typo},
		{"serve", []string{"serve"}, map[string]string{"SECKILL_JWT_SECRT": testSecret}, typo},
		{"check", []string{"check"}, map[string]string{"SECKILL_JWT_SECRT": testSecret}, typo},
		{"a transposition", nil, map[string]string{"SECKILL_RAET_USER": "5"}, "unknown setting SECKILL_RAET_USER: did you mean SECKILL_RATE_USER?"},
		{"two, sorted", nil, map[string]string{"SECKILL_RATE_USR": "5", "SECKILL_JWT_SECRT": testSecret},
			typo + "; unknown setting SECKILL_RATE_USR: did you mean SECKILL_RATE_USER?"},
		{"nothing close", nil, map[string]string{"SECKILL_COLOUR": "blue"}, "unknown setting SECKILL_COLOUR (seckill serve -h"},
		{"set but empty", nil, map[string]string{"SECKILL_REDIS_URL": ""}, "unknown setting SECKILL_REDIS_URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["SECKILL_ADDR"], tc.env["SECKILL_METRICS_ADDR"] = "127.0.0.1:0", "127.0.0.1:0"
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out bytes.Buffer
			err := run(ctx, tc.args, tc.env, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %q with %v: %v (printed %q); want it refused: %q", tc.args, tc.env, err, out.String(), tc.want)
			}
			if strings.Contains(out.String(), "listening") {
				t.Fatalf("run %q with %v started: %q", tc.args, tc.env, out.String())
			}
		})
	}
	if near := closestSetting("SECKILL_PORT", settings(&config{})); near != "" {
		t.Errorf("SECKILL_PORT is taken for a typo of %s: want no suggestion that far", near)
	}
}

// TestBinaryRefusesAnUnknownSetting: the built binary, run as `go run ./cmd/seckill` runs it,
// reads its names from the process's environment and refuses the misspelt secret.
func TestBinaryRefusesAnUnknownSetting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.Binary(t))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"SECKILL_ADDR=127.0.0.1:0", "SECKILL_METRICS_ADDR=127.0.0.1:0", "SECKILL_JWT_SECRT=" + testSecret}
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "unknown setting SECKILL_JWT_SECRT: did you mean SECKILL_JWT_SECRET?") {
		t.Fatalf("seckill with SECKILL_JWT_SECRT: %v (timed out: %v)\n%s\nwant it to refuse to start, naming SECKILL_JWT_SECRET", err, ctx.Err() != nil, out)
	}
}

// TestEnvironmentKeepsTheFirstValue: a name the environment gives twice has the value os.Getenv
// reads, the first.
func TestEnvironmentKeepsTheFirstValue(t *testing.T) {
	env := environment([]string{"SECKILL_ADDR=127.0.0.1:1", "A=b=c", "SECKILL_ADDR=127.0.0.1:2", "EMPTY="})
	if env["SECKILL_ADDR"] != "127.0.0.1:1" || env["A"] != "b=c" || len(env) != 3 {
		t.Fatalf("environment = %v", env)
	}
}

// TestDemoOnlyWithoutADeployment: the demo login (anyone is anyone) is on by default only for a
// node with no deployment setting, as `go run ./cmd/seckill` starts one (on a SQLite file of
// its choice too); any deployment setting keeps it off unless SECKILL_DEMO asks for it.
func TestDemoOnlyWithoutADeployment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		demo bool
	}{
		{"nothing", nil, true},
		{"a SQLite file", map[string]string{"SECKILL_DB": "sqlite:/tmp/try.db", "SECKILL_ADDR": "0.0.0.0:8080"}, true},
		{"a JWT secret", map[string]string{"SECKILL_JWT_SECRET": testSecret}, false},
		{"an identity provider", map[string]string{"SECKILL_JWKS_URL": "https://id.example.test/certs"}, false},
		{"Redis", map[string]string{"SECKILL_REDIS": "redis://127.0.0.1:6379/0"}, false},
		{"MariaDB", map[string]string{"SECKILL_DB": "mysql://seckill:pw@127.0.0.1:3306/seckill"}, false},
		{"PostgreSQL", map[string]string{"SECKILL_DB": "postgres://seckill:pw@127.0.0.1/seckill"}, false},
		{"an admin token", map[string]string{"SECKILL_ADMIN_TOKEN": testAdmin}, false},
		{"named admins", map[string]string{"SECKILL_ADMIN_TOKENS": "grafana:viewer:0123456789abcdef"}, false},
		{"a payment provider", map[string]string{"SECKILL_PAYMENT_URL": "https://pay.example.test/checkout", "SECKILL_PAYMENT_SECRET": "0123456789abcdef"}, false},
		{"webhooks", map[string]string{"SECKILL_WEBHOOK_URL": "https://shop.example.test/hook", "SECKILL_WEBHOOK_SECRET": "0123456789abcdef"}, false},
		{"Kafka", map[string]string{"SECKILL_KAFKA_BROKERS": "127.0.0.1:9092"}, false},
		{"a trusted proxy", map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8"}, false},
		{"Redis and SECKILL_DEMO=1", map[string]string{"SECKILL_REDIS": "redis://127.0.0.1:6379/0", "SECKILL_DEMO": "1"}, true},
		{"nothing and SECKILL_DEMO=0", map[string]string{"SECKILL_DEMO": "0"}, false},
	}
	for _, tc := range tests {
		c, err := parseServe(nil, tc.env, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.demo != tc.demo {
			t.Errorf("%s (%v): demo %v, want %v", tc.name, tc.env, c.demo, tc.demo)
		}
	}
}

// TestDemoLoginOffWithAnAdminToken: a node given an admin token and nothing else (no JWT secret)
// serves no demo login: POST /api/login is not found, and no demo activity is seeded.
func TestDemoLoginOffWithAnAdminToken(t *testing.T) {
	base := startRun(t, map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_METRICS_ADDR": "127.0.0.1:0", "SECKILL_DB": sqliteDSN(t),
		"SECKILL_ADMIN_TOKEN": testAdmin, "SECKILL_LOG_LEVEL": "warn"})
	c := newClient(t, base)
	c.Must("POST", "/api/login", "", `{"user":"alice"}`, http.StatusNotFound)
	c.Must("GET", "/api/activities/demo", "", "", http.StatusNotFound)
}
