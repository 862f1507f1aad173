package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: the image's health check says 0 for a node that answers 200 and fails for one that
// answers otherwise or not at all, asking the node's own address (127.0.0.1 when it listens on
// every interface).
func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	every := func(string) string { return "0.0.0.0:" + port }
	if err := probeCmd(t.Context(), nil, every, io.Discard, io.Discard); err != nil {
		t.Fatalf("a node that answers 200: %v", err)
	}
	if err := probeCmd(t.Context(), []string{"-path", "/readyz"}, every, io.Discard, io.Discard); err != nil {
		t.Fatalf("-path /readyz: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := probeCmd(t.Context(), nil, every, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a node that answers 503: %v, want a failure", err)
	}
	srv.Close()
	if err := probeCmd(t.Context(), nil, every, io.Discard, io.Discard); err == nil {
		t.Fatal("no node at all: the probe passed")
	}
	if err := probeCmd(t.Context(), nil, func(string) string { return "no-port" }, io.Discard, io.Discard); err == nil {
		t.Fatal("a listen address without a port: the probe passed")
	}
}
