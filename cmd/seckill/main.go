// Command seckill is the flash-sale and red-packet engine: `seckill serve` (the default) runs the
// API, the stock gate, the order worker and the payment-window sweeper in one process.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], environment(os.Environ()), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

const usage = `usage: seckill [serve|bench|draw|probe|check|plan|risk] [flags]

Commands:
  serve   run the API, stock gate, order worker and sweeper (the default)
  bench   send a flash crowd to a server (or to one it starts in process) and check the sale
  draw    recompute a verifiable draw from its revealed seed and the entries on stdin
  probe   ask the node on this machine (SECKILL_ADDR) whether it serves: the image's health check
  check   read serve's configuration, refuse a SECKILL_* variable it does not know, print it
  plan    size a deployment for a sale from the costs bench measured (docs/CAPACITY.md)
  risk    generate labelled requests from the bench's bots and people (risk gen), label a node's
          recording (risk label), train the risk model (risk train), or measure it (risk eval)

Run 'seckill COMMAND -h' for a command's flags; serve's each have an environment
variable.
`

// run is the whole program: main only adds the process's signals, arguments and environment
// (env: each variable's value by name; serve refuses a SECKILL_* name it does not read).
func run(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) error {
	getenv := func(k string) string { return env[k] }
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseServe(args, env, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout, stderr)
	case "bench":
		return benchCmd(ctx, args, getenv, stdout, stderr)
	case "draw":
		return drawCmd(args, os.Stdin, stdout, stderr)
	case "probe":
		return probeCmd(ctx, args, getenv, stdout, stderr)
	case "check":
		return checkCmd(args, env, stdout, stderr)
	case "plan":
		return planCmd(ctx, args, getenv, stdout, stderr)
	case "risk":
		return riskCmd(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// environment is environ (os.Environ's KEY=value list) by name. A name given twice has its
// first value, as os.Getenv reads it.
func environment(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := env[k]; !seen {
			env[k] = v
		}
	}
	return env
}
