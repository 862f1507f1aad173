package main

import (
	"io"
	"os"
	"regexp"
	"seckill/internal/httpapi"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadmeListsEverySetting holds the README's configuration table against serve's settings
// table: every setting has its row with its flag, its environment variable and its default, and
// every row is a setting.
func TestReadmeListsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Configuration\n")
	if start < 0 {
		t.Fatal("README.md has no Configuration section")
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	row := regexp.MustCompile("(?m)^\\| `-([a-z-]+)` \\| `?([A-Z_]*)`? \\|.*\\| ([^|]*) \\|$")
	rows := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		rows[m[1]] = m[2:]
	}
	table := settings(&config{})
	for _, s := range table {
		r, ok := rows[s.flag]
		if !ok {
			t.Errorf("README's configuration table has no row for -%s (%s)", s.flag, s.env)
			continue
		}
		if r[0] != s.env {
			t.Errorf("README: -%s has the variable %q, the binary reads %s", s.flag, r[0], s.env)
		}
		def := strings.TrimSpace(r[1])
		if strings.HasPrefix(def, "`") && def != "`"+s.def+"`" {
			t.Errorf("README: -%s defaults to %s, the binary to %q", s.flag, def, s.def)
		}
		if s.def == "" && strings.HasPrefix(def, "`") {
			t.Errorf("README: -%s defaults to %s, the binary to nothing", s.flag, def)
		}
		delete(rows, s.flag)
	}
	for flag := range rows {
		t.Errorf("README lists -%s, which serve does not have", flag)
	}
	if len(table) < 25 {
		t.Fatalf("the settings table has %d settings: the README's rows were not all read", len(table))
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
	getenv := func(k string) string { return env[k] }
	c, err := parseServe(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.sweepEvery != 250*time.Millisecond || c.rateUser != 9 {
		t.Fatalf("sweep every %v, user rate %d: want the variables' 250ms and 9", c.sweepEvery, c.rateUser)
	}
	if c, err = parseServe([]string{"-sweep-every", "2s"}, getenv, io.Discard); err != nil || c.sweepEvery != 2*time.Second {
		t.Fatalf("-sweep-every 2s with SECKILL_SWEEP_EVERY=250ms: %v, %v; want the flag's 2s", c.sweepEvery, err)
	}
	env["SECKILL_SWEEP_EVERY"] = "0s"
	if _, err := parseServe(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), `SECKILL_SWEEP_EVERY="0s" (-sweep-every): want a positive duration`) {
		t.Fatalf("SECKILL_SWEEP_EVERY=0s: %v; want it refused, naming the variable", err)
	}
	c, err = parseServe(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.sweepEvery != time.Second || c.role != roleAll || !c.demo || c.reconcileEvery != time.Hour || c.gateLimits.FailRate != 0.05 {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestAdminTokensSetting: SECKILL_ADMIN_TOKENS gives each admin its name, role and token.
func TestAdminTokensSetting(t *testing.T) {
	env := map[string]string{"SECKILL_ADMIN_TOKENS": " grafana:viewer:0123456789abcdef , carol:operator:fedcba9876543210fedc"}
	c, err := parseServe(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: "0123456789abcdef"},
		{Name: "carol", Role: httpapi.RoleOperator, Token: "fedcba9876543210fedc"}}
	if !slices.Equal(c.admins, want) {
		t.Fatalf("admins %+v, want %+v", c.admins, want)
	}
}

// TestEventsKeepSetting: the delivered order events are kept a week by default, for ever with 0,
// and never less than a second (a purge every nanosecond).
func TestEventsKeepSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 7 * 24 * time.Hour, "0": 0, "36h": 36 * time.Hour} {
		c, err := parseServe(nil, func(k string) string {
			if k == "SECKILL_EVENTS_KEEP" {
				return v
			}
			return ""
		}, io.Discard)
		if err != nil || c.eventsKeep != want {
			t.Errorf("SECKILL_EVENTS_KEEP=%q: %v, %v; want %v", v, c.eventsKeep, err, want)
		}
	}
	if _, err := parseServe([]string{"-events-keep", "500ms"}, func(string) string { return "" }, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "SECKILL_EVENTS_KEEP") {
		t.Errorf("-events-keep 500ms: %v; want it refused, naming the variable", err)
	}
}
