//go:build release

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"seckill/internal/bench"
)

// owned is, in a release build, nothing: it starts no server (see benchfault.go).
type owned struct{}

func (o *owned) stop() {}

func (o *owned) fault(benchConfig) func(context.Context, string) error { return nil }

func (o *owned) badNetworks() bool { return false }

func (o *owned) saveLogs(string) (string, error) { return "", errors.New(withoutLab) }

func (o *owned) striker(*bench.Fleet, []int, *bench.Client) func(context.Context, bench.Strike, string) (func(context.Context) error, error) {
	return nil
}

// spawnFsync is empty: a release build starts no Redis.
const spawnFsync = ""

// startServers refuses what only a development build can do: start servers, and strike them.
// Everything else bench does (a crowd against --url, an in-process server, a fleet of nodes on
// the --db and --redis given, the api and worker faults) a release build does too.
func startServers(c *benchConfig) (*owned, error) {
	switch {
	case strings.HasPrefix(c.redis, "spawn"), strings.HasPrefix(c.db, "spawn"):
		return &owned{}, fmt.Errorf("--redis %q --db %q: %s", c.redis, c.db, withoutLab)
	case c.fault != "" && c.fault != "api" && c.fault != "worker":
		return &owned{}, fmt.Errorf("--fault %s: %s", c.fault, withoutLab)
	case c.nemesis:
		return &owned{}, fmt.Errorf("--nemesis: %s", withoutLab)
	}
	return &owned{}, nil
}

const withoutLab = "this seckill is a release build (-tags release), which cannot start servers or strike them; " +
	"run it from a development build (go run ./cmd/seckill bench ...)"

// startStripeMock refuses: stripe-mock is a lab server, which a release build does not start.
func startStripeMock(string) (string, func(), error) { return "", nil, errors.New(withoutLab) }
