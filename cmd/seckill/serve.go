package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"time"

	"seckill/internal/node"
)

func randomSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shutdownGrace is how long a node stopping (SIGTERM) waits for its in-flight requests. The
// deployment files give a stopping pod or container this and more (deploy_test.go checks it).
const shutdownGrace = 30 * time.Second

// serve builds every dependency explicitly, serves until ctx ends, then shuts down in order:
// stop accepting and drain in-flight requests, stop the worker and the sweeper, close the gate
// and its queue, close the database.
func serve(ctx context.Context, c config, stdout, stderr io.Writer) error {
	log := slog.New(traceIDs{slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel})})
	if c.tracing {
		stop, err := startTracing(ctx)
		if err != nil {
			return err
		}
		defer func() {
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := stop(flush); err != nil {
				log.Warn("flush traces", "err", err)
			}
		}()
	}
	secretShown, tokenShown := c.API.JWTSecret == "", c.API.AdminToken == ""
	if secretShown {
		c.API.JWTSecret = randomSecret()
	}
	if tokenShown {
		c.API.AdminToken = randomSecret()
	}
	nc := c.Config
	nc.Log = log
	nc.API.DevLogin = c.demo
	// The metrics (every activity's counters, the node's health) and the profiles are the
	// operators': each is served on a listener of its own, never on the API's, which the
	// public reaches. A development build's lab clock is set there too.
	scrape := http.NewServeMux()
	if c.labClock {
		withLabClock(&nc.Now, scrape)
	}
	n, err := node.Open(ctx, nc)
	if err != nil {
		return err
	}
	defer n.Close() // its loops stop first, then the risk recording, the gate and its queue close, the database last
	svc, stats := n.Service, n.Metrics
	var demoEnded []string
	if c.demo {
		if demoEnded, err = seedDemo(ctx, svc, time.Now()); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	scrape.Handle("GET /metrics", stats.Handler())
	ms, metricsAt, err := serveAside(c.metricsAddr, scrape)
	if err != nil {
		ln.Close()
		return fmt.Errorf("SECKILL_METRICS_ADDR: %w", err)
	}
	defer ms.Close()
	if c.pprofAddr != "" {
		ps, at, err := serveAside(c.pprofAddr, pprofMux())
		if err != nil {
			ln.Close()
			return fmt.Errorf("SECKILL_PPROF: %w", err)
		}
		defer ps.Close()
		log.Info("profiles", "addr", at)
	}

	handler := n.Handler()
	if c.tracing {
		handler = traced(handler)
	}
	srv := &http.Server{
		Handler: handler,
		// One read deadline for the headers and the (at most 64 KiB) body together: a slow
		// client gets 5 s, and the server sets one deadline per request instead of two.
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(n.API.StopStreams) // Shutdown waits for handlers; live streams never end

	n.Start()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "metrics: http://%s/metrics\n", metricsAt)
	fmt.Fprintf(stdout, "seckill listening on %s\n", base)
	if tokenShown {
		fmt.Fprintf(stdout, "admin token: %s\n", c.API.AdminToken)
	}
	if secretShown {
		fmt.Fprintf(stdout, "JWT secret (random for this run): %s\n", c.API.JWTSecret)
	}
	if c.Role != node.RoleWorker {
		fmt.Fprintf(stdout, "pages: %s/  dashboard: %s/admin\n", base, base)
	}
	if c.demo {
		fmt.Fprintf(stdout, "demo sale: %s/activity/%s  red packet: %s/activity/%s  waiting line: %s/activity/%s  (dev login on the page, or POST %s/api/login {\"user\":\"alice\"})\n",
			base, demoID, base, demoPacketID, base, demoQueueID, base)
		if len(demoEnded) > 0 {
			fmt.Fprintf(stdout, "the demo activities %s of this database have ended: start on a new -db (or remove its file) for fresh ones\n",
				strings.Join(demoEnded, ", "))
		}
	}
	if c.ready != nil {
		c.ready(base)
	}
	log.Info("serving", "addr", ln.Addr().String(), "metrics", metricsAt, "role", c.Role, "db", redactDSN(c.DB), "redis", c.Redis != "", "demo", c.demo)

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		log.Info("shutting down")
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		err = srv.Shutdown(shut)
		cancel()
	}
	// Every grab answered has been committed (Shutdown waited for the handlers). The worker
	// finishes its batch and the sweeper its round before the gate and the queue close under
	// them; the database closes last.
	n.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// serveAside serves h at addr, on a listener of its own apart from the API's, until the server
// it returns is closed; at is the address it listens on.
func serveAside(addr string, h http.Handler) (s *http.Server, at string, err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	s = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go s.Serve(l)
	return s, l.Addr().String(), nil
}

// pprofMux serves Go's profiles: never on the API's listener, only on the SECKILL_PPROF one.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// redactDSN hides a database password in logs.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxx")
			return u.String()
		}
	}
	return dsn
}
