package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// probeTimeout bounds a probe: a node that takes longer to answer /healthz is as good as down.
const probeTimeout = 3 * time.Second

// probeCmd asks a node on this machine whether it serves: GET /healthz on the address it listens
// on (SECKILL_ADDR), exit status 0 on a 200. It is the container image's HEALTHCHECK, which
// has no shell or curl to do it.
func probeCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("SECKILL_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	path := fs.String("path", "/healthz", "the `path` to ask: /healthz (the process serves) or /readyz (its dependencies answer)")
	fs.StringVar(&addr, "addr", addr, "the node's listen `address` (SECKILL_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("probe: SECKILL_ADDR=%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // listening everywhere: ask it here
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + *path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return errors.New("probe: " + url + " answered " + resp.Status)
	}
	fmt.Fprintln(stdout, "ok", url)
	return nil
}
