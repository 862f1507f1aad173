package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client speaks the server's HTTP API as a crowd and as its admin would.
type Client struct {
	base  string
	admin string
	http  *http.Client
}

// NewClient returns a client of the server at base (http://host:port) keeping up to conns
// connections open.
func NewClient(base, adminToken string, conns int) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http://host:port", base)
	}
	tr := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{base: strings.TrimRight(base, "/"), admin: adminToken,
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// Close closes the idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// apiError is an answer other than the one wanted.
type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// do sends a request and decodes a JSON answer into out when the status is want.
func (c *Client) do(ctx context.Context, method, path, bearer string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(data, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Msg: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// Health checks that a seckill server answers at the base URL.
func (c *Client) Health(ctx context.Context) error {
	if err := c.do(ctx, "GET", "/healthz", "", nil, http.StatusOK, nil); err != nil {
		return fmt.Errorf("%s is not a running seckill server: %w", c.base, err)
	}
	return nil
}

// CheckUserToken checks that the server accepts token: asking for an order that does not exist
// is 404 to a known user and 401 to a token signed with another secret.
func (c *Client) CheckUserToken(ctx context.Context, token string) error {
	err := c.do(ctx, "GET", "/api/orders/bench-no-such-order", token, nil, http.StatusNotFound, nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return errors.New("the server refuses the user tokens: is --jwt-secret the server's SECKILL_JWT_SECRET?")
	}
	return err
}

// ActivitySpec is the activity a run creates.
type ActivitySpec struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Stock        *int64 `json:"stock,omitempty"`
	Count        *int64 `json:"count,omitempty"`
	TotalCents   int64  `json:"total_cents,omitempty"`
	PriceCents   int64  `json:"price_cents"`
	PerUserLimit int64  `json:"per_user_limit"`
	StartAt      string `json:"start_at"`
	EndAt        string `json:"end_at"`
	PayWindowS   int64  `json:"pay_window_s"`
}

// CreateActivity creates the activity and returns its id.
func (c *Client) CreateActivity(ctx context.Context, a ActivitySpec) (string, error) {
	var out struct{ ID string }
	err := c.do(ctx, "POST", "/api/admin/activities", c.admin, a, http.StatusCreated, &out)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return "", errors.New("the server refuses the admin token: is --admin-token the server's SECKILL_ADMIN_TOKEN?")
	}
	if err != nil {
		return "", fmt.Errorf("create the activity: %w", err)
	}
	return out.ID, nil
}

// Stats reads the server's counters of an activity.
func (c *Client) Stats(ctx context.Context, id string) (Stats, error) {
	var st Stats
	if err := c.do(ctx, "GET", "/api/admin/activities/"+url.PathEscape(id)+"/stats", c.admin, nil, http.StatusOK, &st); err != nil {
		return Stats{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	return st, nil
}

// Order reads an order as its owner (bearer) sees it; a 404 is an Order that was not found.
func (c *Client) Order(ctx context.Context, token, bearer string) (Order, error) {
	var out struct {
		Status      string `json:"status"`
		AmountCents int64  `json:"amount_cents"`
	}
	err := c.do(ctx, "GET", "/api/orders/"+url.PathEscape(token), bearer, nil, http.StatusOK, &out)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return Order{}, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %s: %w", token, err)
	}
	return Order{Found: true, Status: out.Status, AmountCents: out.AmountCents}, nil
}

// Grab sends one grab request and records how it went. Times are Unix microseconds.
func (c *Client) Grab(ctx context.Context, activity, user, bearer string) Record {
	r := Record{User: user}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/activities/"+url.PathEscape(activity)+"/grab", nil)
	if err != nil {
		r.Outcome, r.Err = Error, err.Error()
		return r
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	r.Start = time.Now().UnixMicro()
	resp, err := c.http.Do(req)
	if err != nil {
		r.End, r.Outcome, r.Err = time.Now().UnixMicro(), Error, err.Error()
		return r
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r.End, r.Status, r.Outcome = time.Now().UnixMicro(), resp.StatusCode, outcomeOf(resp.StatusCode)
	if err != nil {
		r.Outcome, r.Err = Error, err.Error()
		return r
	}
	var body struct {
		OrderToken  string `json:"order_token"`
		AmountCents int64  `json:"amount_cents"`
		Error       struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		r.Outcome, r.Err = Error, "answer is not JSON: "+err.Error()
		return r
	}
	r.Token, r.Amount, r.Code = body.OrderToken, body.AmountCents, body.Error.Code
	return r
}
