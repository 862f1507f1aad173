package netfault

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves a line-echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through a new connection to addr and reads it back within d.
func roundTrip(addr string, d time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echoed " + line)
	}
	return err
}

func TestFaults(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := roundTrip(p.Addr(), time.Second); err != nil {
		t.Fatalf("through a healthy proxy: %v", err)
	}

	if err := p.Inject(Latency, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := roundTrip(p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("with latency: %v", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("a round trip with 100 ms each way took %v", took)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}

	if err := p.Inject(Reset, 0); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(p.Addr(), time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a resetting link: %v, want the connection broken", err)
	}
	p.Heal()

	if err := p.Inject(HalfOpen, 0); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(p.Addr(), 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a half-open link: %v, want no answer until the deadline", err)
	}
	if err := p.Inject(Latency, time.Millisecond); err != nil {
		t.Fatalf("a second fault on top: %v", err)
	}
	p.Heal()
	if err := roundTrip(p.Addr(), time.Second); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	if err := p.Inject("flood", 0); err == nil {
		t.Fatal("an unknown fault was accepted")
	}
}
