package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/httpapi/wire"
)

// Client speaks the server's HTTP API as a crowd and as its admin would. It may know several
// nodes of one deployment; requests are spread over them.
type Client struct {
	admin string
	http  *http.Client
	crowd *clicker // the crowd's clicks

	mu    sync.RWMutex
	bases []string
}

// NewClient returns a client of the servers at bases (http://host:port) keeping up to conns
// connections open.
func NewClient(bases []string, adminToken string, conns int) (*Client, error) {
	if len(bases) == 0 {
		return nil, errors.New("no server to send the crowd to")
	}
	c := &Client{admin: adminToken, crowd: newClicker(requestTimeout)}
	for _, b := range bases {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("url %q: want http://host:port", b)
		}
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	tr := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
	}
	c.http = &http.Client{Transport: tr, Timeout: requestTimeout}
	return c, nil
}

// requestTimeout bounds every request, its answer read in full.
const requestTimeout = 30 * time.Second

// Close closes the idle connections.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
	c.crowd.close()
}

// Open opens n connections for the crowd ahead of its clicks, spread over the nodes (less those
// it keeps open already), as a load balancer in front of the nodes keeps its connections to them:
// so that a run times the server answering its clicks, not a storm of TCP handshakes in its first
// milliseconds. It is best effort: a node that cannot be reached is dialed again by the clicks
// sent to it, which report their own errors. A connection opened and not used within a second
// is closed rather than used, as the server may have closed it.
func (c *Client) Open(ctx context.Context, n int) {
	c.mu.RLock()
	bases := slices.Clone(c.bases)
	c.mu.RUnlock()
	for i, b := range bases {
		c.crowd.open(ctx, b, n/len(bases)+min(1, max(0, n%len(bases)-i)))
	}
}

// SetBase points node i at a new address (a node restarted on another port).
func (c *Client) SetBase(i int, base string) {
	c.mu.Lock()
	c.bases[i] = strings.TrimRight(base, "/")
	c.mu.Unlock()
}

// Bases are the nodes' base URLs as they are now (SetBase moves one).
func (c *Client) Bases() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.bases)
}

func (c *Client) base(i int) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bases[i%len(c.bases)]
}

// send sends the request mk builds to node i; when the node refuses the connection (it is down:
// nothing was sent) it tries the next nodes in turn, as a load balancer checking its backends
// would. It returns the node that answered.
func (c *Client) send(i int, mk func(base string) (*http.Request, error)) (*http.Response, int, error) {
	var resp *http.Response
	node, err := c.onNodes(i, func(base string) error {
		req, err := mk(base)
		if err != nil {
			return err
		}
		resp, err = c.http.Do(req)
		return err
	})
	return resp, node, err
}

// onNodes runs try on node i's base URL and, while it is refused (the node is down: nothing was
// sent), on the next nodes in turn. It returns the node that answered; i's when none did.
func (c *Client) onNodes(i int, try func(base string) error) (int, error) {
	n := len(c.bases) // SetBase replaces a node, never adds one
	var err error
	for k := range n {
		node := (i + k) % n
		if err = try(c.base(node)); err == nil || !refused(err) {
			return node, err
		}
	}
	return i % n, err
}

// How a crowd's buyer clicks again when no node takes the connection: after refusedPause, for
// up to refusedPatience in all (then the click is recorded NotSent).
const (
	refusedPause    = 50 * time.Millisecond
	refusedPatience = 30 * time.Second
)

// refused reports whether err is a connection that could not be made: the request never left.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// apiError is an answer other than the one wanted.
type apiError struct {
	Status     int
	Code       string
	Msg        string
	RetryAfter time.Duration // from the header; at least 100 ms
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// busyFor is how long a read keeps asking a server that answers 503 BUSY (a dependency coming
// back, a circuit breaker probing) before it reports the 503.
const busyFor = 30 * time.Second

// do sends a request and decodes a JSON answer into out when the status is want. A GET answered
// 503 is asked again after the server's Retry-After, as a well-behaved client would, for up to
// busyFor.
func (c *Client) do(ctx context.Context, method, path, bearer string, body any, want int, out any) error {
	deadline := time.Now().Add(busyFor)
	for {
		err := c.doOnce(ctx, method, path, bearer, body, want, out)
		var ae *apiError
		if method != http.MethodGet || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable ||
			time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(ae.RetryAfter, time.Second)):
		}
	}
}

func (c *Client) doOnce(ctx context.Context, method, path, bearer string, body any, want int, out any) error {
	return c.doOn(ctx, 0, method, path, bearer, body, want, out)
}

// doOn sends one request to node i (or, if it is down, the next one up) and decodes a JSON
// answer into out when the status is want.
func (c *Client) doOn(ctx context.Context, i int, method, path, bearer string, body any, want int, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, _, err := c.send(i, func(base string) (*http.Request, error) {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err == nil && bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return req, err
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		var e wire.ErrorBody
		json.Unmarshal(data, &e)
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Msg: e.Error.Message,
			RetryAfter: max(time.Duration(retry)*time.Second, 100*time.Millisecond)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// Health checks that a seckill server answers at the base URL.
func (c *Client) Health(ctx context.Context) error {
	if err := c.do(ctx, "GET", "/healthz", "", nil, http.StatusOK, nil); err != nil {
		return fmt.Errorf("%s is not a running seckill server: %w", c.base(0), err)
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

// CreateActivity creates the activity and returns its id.
func (c *Client) CreateActivity(ctx context.Context, a wire.CreateActivityRequest) (string, error) {
	var out wire.CreatedResponse
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

// Stats reads the server's counters of an activity. A degraded server sheds the database's
// counts; that is an error here, so that nobody mistakes a missing count for a zero.
func (c *Client) Stats(ctx context.Context, id string) (wire.StatsResponse, error) {
	var st struct {
		wire.StatsResponse
		Shed []string `json:"shed"` // a wire.ShedStatsResponse's: what a degraded server left out
	}
	if err := c.do(ctx, "GET", "/api/admin/activities/"+url.PathEscape(id)+"/stats", c.admin, nil, http.StatusOK, &st); err != nil {
		return wire.StatsResponse{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	if len(st.Shed) > 0 {
		return wire.StatsResponse{}, fmt.Errorf("stats of %s: the server is degraded and shed %v", id, st.Shed)
	}
	return st.StatsResponse, nil
}

// Order reads an order as its owner (bearer) sees it; a 404 is an Order that was not found.
func (c *Client) Order(ctx context.Context, token, bearer string) (Order, error) {
	var out wire.OrderResponse
	err := c.do(ctx, "GET", "/api/orders/"+url.PathEscape(token), bearer, nil, http.StatusOK, &out)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return Order{}, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %s: %w", token, err)
	}
	o := Order{Found: true, Status: out.Status, AmountCents: out.AmountCents, Reason: out.Reason}
	if out.ExpiresAt != nil {
		o.ExpiresAt = *out.ExpiresAt
	}
	if out.ClosedAt != nil {
		o.ClosedAt = *out.ClosedAt
	}
	return o, nil
}

// Board reads the amounts of a red packet's leaderboard, top n in order.
func (c *Client) Board(ctx context.Context, id string, n int) ([]int64, error) {
	var out wire.BoardResponse
	if err := c.do(ctx, "GET", "/api/activities/"+url.PathEscape(id)+"/leaderboard?limit="+strconv.Itoa(n), "", nil, http.StatusOK, &out); err != nil {
		return nil, fmt.Errorf("leaderboard of %s: %w", id, err)
	}
	amounts := make([]int64, len(out.Entries))
	for i, e := range out.Entries {
		amounts[i] = e.AmountCents
	}
	return amounts, nil
}

// Pay pays an order as its owner (bearer) and returns the status the server answers.
func (c *Client) Pay(ctx context.Context, token, bearer string) (string, error) {
	var out wire.OrderResponse
	if err := c.do(ctx, "POST", "/api/orders/"+url.PathEscape(token)+"/pay", bearer, nil, http.StatusOK, &out); err != nil {
		return "", fmt.Errorf("pay %s: %w", token, err)
	}
	return string(out.Status), nil
}

// Cancel cancels an order as its owner (bearer): its unit goes back on sale.
func (c *Client) Cancel(ctx context.Context, token, bearer string) error {
	if err := c.do(ctx, "POST", "/api/orders/"+url.PathEscape(token)+"/cancel", bearer, nil, http.StatusOK, nil); err != nil {
		return fmt.Errorf("cancel %s: %w", token, err)
	}
	return nil
}

// StartPayment is the pay call of a server with a payment provider: 202, the payment started
// and where to pay it.
func (c *Client) StartPayment(ctx context.Context, token, bearer string) (*wire.PaymentResponse, error) {
	var out wire.OrderResponse
	if err := c.do(ctx, "POST", "/api/orders/"+url.PathEscape(token)+"/pay", bearer, nil, http.StatusAccepted, &out); err != nil {
		return nil, fmt.Errorf("pay %s: %w", token, err)
	}
	if out.Payment == nil || out.Payment.PayURL == "" {
		return nil, fmt.Errorf("pay %s: the answer has no payment and page", token)
	}
	return out.Payment, nil
}

// Grab sends one grab request to node i (or, if it is down, the next one up; if every node is
// down, again a moment later) and records how it went. Times are Unix microseconds.
func (c *Client) Grab(ctx context.Context, i int, activity, user, bearer string) Record {
	return c.GrabKeyed(ctx, i, activity, user, bearer, "")
}

// GrabKeyed is Grab with an Idempotency-Key (none when key is empty): a click sent again with
// the same key is owed the first one's answer.
func (c *Client) GrabKeyed(ctx context.Context, i int, activity, user, bearer, key string) Record {
	r := Record{User: user, Key: key}
	r.Start = time.Now().UnixMicro()
	path := "/api/activities/" + url.PathEscape(activity) + "/grab"
	var a answer
	var node int
	var err error
	// A buyer whose click reaches no node (every one down: the only node killed and restarting)
	// clicks again a moment later, as a page that could not connect is clicked again, for a
	// while: so a crowd that outruns a node's restart still asks the node that comes back.
	for patience := time.Now().Add(refusedPatience); ; {
		node, err = c.onNodes(i, func(base string) (err error) {
			a, err = c.crowd.post(ctx, base, path, bearer, key)
			return err
		})
		if err == nil || !refused(err) || ctx.Err() != nil || time.Now().After(patience) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(refusedPause):
		}
	}
	r.Node, r.End = node, time.Now().UnixMicro()
	if err != nil {
		r.Outcome, r.Err, r.NotSent = Error, err.Error(), refused(err)
		if a.status != 0 {
			r.Status = a.status
		}
		return r
	}
	r.Status, r.Outcome, r.RetryAfter = a.status, outcomeOf(a.status), int(a.retry/time.Second)
	data := a.body
	var body struct {
		wire.GrabResponse        // a unit won
		QueueToken        string `json:"queue_token"` // a place in the line: a wire.TicketResponse
		wire.ErrorBody           // a refusal
	}
	if err := json.Unmarshal(data, &body); err != nil {
		r.Outcome, r.Err = Error, "answer is not JSON: "+err.Error()
		return r
	}
	r.Token, r.Ticket, r.Amount, r.Code = body.OrderToken, body.QueueToken, body.AmountCents, body.Error.Code
	if r.Status >= http.StatusInternalServerError {
		r.Detail = body.Error.Message // why it refused: the nemesis's availability says it
	}
	if r.Status == http.StatusForbidden && r.Code == wire.CodeEnded {
		r.Outcome = Ended
	}
	return r
}
