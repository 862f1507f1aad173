package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedIsCurrent: guarded_gen.go is what guardgen writes from today's ports, so a port
// method added without `go generate ./internal/breaker` fails here (and a method the decorator
// lacks would not compile).
func TestGeneratedIsCurrent(t *testing.T) {
	want, err := generate("../../sale")
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../guarded_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("internal/breaker/guarded_gen.go is behind internal/sale's ports: run go generate ./internal/breaker")
	}
}

// TestGenerateFollowsThePorts writes a port of its own: an embedded interface's methods are
// decorated, a slow one without the deadline, and several results travel as one struct.
func TestGenerateFollowsThePorts(t *testing.T) {
	dir := t.TempDir()
	src := `package sale

import "context"

type Thing struct{}

type Inner interface {
	Fetch(ctx context.Context, id string) (Thing, int64, error)
}

type Challenges interface {
	Inner
	Put(ctx context.Context, t Thing) error
}
`
	if err := os.WriteFile(filepath.Join(dir, "ports.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := ports
	t.Cleanup(func() { ports = saved })
	ports = []port{{iface: "Challenges", fn: "GuardChallenges", doc: "returns p.", slow: map[string]string{"Put": "it is"}}}
	out, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"func (x guardedChallenges) Fetch(ctx context.Context, id string) (sale.Thing, int64, error)",
		"v, err := Call(ctx, x.guard, func(ctx context.Context) (results, error) {",
		"// Put is slow (no call deadline): it is.",
		"return x.guard.Slow(ctx, func(ctx context.Context) error { return x.p.Put(ctx, t) })",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("generated source lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), `"time"`) {
		t.Errorf("generated source imports time, which no method takes:\n%s", out)
	}
	ports[0].slow = map[string]string{"Gone": "no such method"}
	if _, err := generate(dir); err == nil {
		t.Fatal("a slow method the port does not have was accepted")
	}
}
