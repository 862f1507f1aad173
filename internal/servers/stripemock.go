package servers

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StripeMock is a stripe-mock server (github.com/stripe/stripe-mock, Stripe's API mock) on a
// loopback port: Stripe's API as its OpenAPI document describes it, answering every documented
// call with a fixture, keeping nothing between calls and sending no webhooks.
type StripeMock struct {
	p   *Process
	url string
}

// stripeMockStartAttempts bounds the retries when the port picked was taken meanwhile.
const stripeMockStartAttempts = 5

// StartStripeMock starts stripe-mock (from PATH, or $GOPATH/bin where `go install` puts it)
// with its log in dir, and waits until it answers.
func StartStripeMock(dir string) (*StripeMock, error) {
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	bin, err := FindBinary("stripe-mock", filepath.Join(strings.Split(gopath, ":")[0], "bin", "stripe-mock"))
	if err != nil {
		return nil, fmt.Errorf("%w (go install github.com/stripe/stripe-mock@v0.203.0)", err)
	}
	logPath := filepath.Join(dir, "stripe-mock.log")
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "-http-addr", "127.0.0.1:"+strconv.Itoa(port))
		p, err := Launch(cmd, logPath, func(p *Process) error {
			return p.WaitReady(30*time.Second, 50*time.Millisecond, func() error {
				resp, err := http.Get(url + "/v1/charges")
				if err != nil {
					return err
				}
				resp.Body.Close()
				return nil
			})
		})
		if err == nil {
			return &StripeMock{p: p, url: url}, nil
		}
		if attempt < stripeMockStartAttempts && strings.Contains(err.Error(), "address already in use") {
			continue
		}
		return nil, err
	}
}

// URL is the mock's base URL, for stripe-go's API backend.
func (s *StripeMock) URL() string { return s.url }

// Stop stops the mock.
func (s *StripeMock) Stop() { s.p.Stop(syscall.SIGTERM, 5*time.Second) }
