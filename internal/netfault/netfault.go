// Package netfault puts a bad network between a node and one of its dependencies: a TCP proxy
// (Shopify's toxiproxy, run in this process) through which the node reaches Redis or the
// database, and which can add latency, reset every connection, or hold a link half open (the
// peer never answers, the connection never closes), then heal. The fault tests and seckill
// bench --fault netem use it.
package netfault

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy forwards a loopback port to an upstream address, with the faults switched on by its
// methods. Its methods may be called from several goroutines.
type Proxy struct {
	p *toxiproxy.Proxy

	mu     sync.Mutex
	toxics []string // the names of the toxics in force
}

// Start listens on a free port of 127.0.0.1 and forwards to upstream ("host:port").
func Start(upstream string) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "to-"+upstream, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netfault: proxy to %s: %w", upstream, err)
	}
	return &Proxy{p: p}, nil
}

// Addr is where to connect to reach upstream through the proxy.
func (p *Proxy) Addr() string { return p.p.Listen }

// Port is Addr's port.
func (p *Proxy) Port() string {
	_, port, _ := net.SplitHostPort(p.p.Listen)
	return port
}

// The faults a Proxy injects.
const (
	Latency  = "latency"  // every chunk each way waits a while
	Reset    = "reset"    // every connection is reset (RST) as soon as data comes
	HalfOpen = "halfopen" // nothing passes and nothing closes: a peer that never answers
)

// Inject switches a fault on, in both directions; latency is Latency's delay.
func (p *Proxy) Inject(fault string, latency time.Duration) error {
	var typ, attrs string
	switch fault {
	case Latency:
		typ, attrs = "latency", fmt.Sprintf(`{"latency":%d,"jitter":%d}`, latency.Milliseconds(), latency.Milliseconds()/10)
	case Reset:
		typ, attrs = "reset_peer", `{"timeout":0}`
	case HalfOpen:
		typ, attrs = "timeout", `{"timeout":0}`
	default:
		return fmt.Errorf("netfault: unknown fault %q: want latency, reset or halfopen", fault)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, dir := range []string{"upstream", "downstream"} {
		name := fault + "_" + dir
		body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, dir, attrs)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return fmt.Errorf("netfault: %s: %w", name, err)
		}
		p.toxics = append(p.toxics, name)
	}
	return nil
}

// Heal switches every fault off. The connections a half-open link held are closed, as a peer
// that comes back after a partition has forgotten them.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range p.toxics {
		if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return fmt.Errorf("netfault: heal %s: %w", name, err)
		}
	}
	p.toxics = nil
	return nil
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() { p.p.Stop() }
