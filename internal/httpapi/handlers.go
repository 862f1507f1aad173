package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/health"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ReadyResponse is /readyz's answer: ready or not (every dependency answers a ping), and the
// node's health level with each dependency's report.
type ReadyResponse struct {
	Status       string          `json:"status"` // ready, or unavailable
	Level        health.Level    `json:"level"`
	Dependencies []health.Report `json:"dependencies"`
	Error        *errorDetail    `json:"error,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	h := s.health.Status()
	resp := ReadyResponse{Status: "ready", Level: h.Level, Dependencies: h.Dependencies}
	if err := s.ready(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		resp.Status, resp.Error = "unavailable", &errorDetail{Code: CodeBusy, Message: err.Error()}
		w.Header()["Retry-After"] = retryAfter
		writeJSON(w, http.StatusServiceUnavailable, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) time(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int64{"now_ms": s.svc.Now().UnixMilli()})
}

type loginResponse struct {
	Token     string    `json:"token"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login is the demo mode's login: anyone can be anyone. Deployments with a real JWT secret
// don't serve it unless SECKILL_DEMO=1.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.devLogin {
		s.writeError(w, r, sale.ErrNotFound)
		return
	}
	var req LoginRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	tok, err := s.tokens.Mint(req.User, now, LoginTTL)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loginResponse{Token: tok, User: req.User, ExpiresAt: now.Add(LoginTTL).UTC()})
}

func (s *Server) createActivity(w http.ResponseWriter, r *http.Request) {
	var req CreateActivityRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := req.Activity()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err = s.svc.CreateActivity(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/activities/"+a.ID)
	writeJSON(w, http.StatusCreated, map[string]string{"id": a.ID})
}

// StatsResponse is an activity's stats with the node's health, and for a red packet the
// strategy and memory of its leaderboard.
type StatsResponse struct {
	sale.Stats
	Health      health.Level     `json:"health"`
	Leaderboard *sale.BoardUsage `json:"leaderboard,omitempty"`
}

// ShedStatsResponse is what a node answers when it cannot answer everything: at degraded, or
// with a dependency away. Shed names what is left out: "counts" (the database's, and the queue's
// depth) or "gate" (remaining and grabbed, when the gate does not answer: Redis failing over).
type ShedStatsResponse struct {
	Stock       int64        `json:"stock"`
	Remaining   *int64       `json:"remaining,omitempty"`
	Grabbed     *int64       `json:"grabbed,omitempty"`
	Orders      *int64       `json:"orders,omitempty"`
	Created     *int64       `json:"created,omitempty"`
	Paid        *int64       `json:"paid,omitempty"`
	Cancelled   *int64       `json:"cancelled,omitempty"`
	Expired     *int64       `json:"expired,omitempty"`
	Failed      *int64       `json:"failed,omitempty"`
	DeadLetters *int64       `json:"dead_letters,omitempty"`
	Health      health.Level `json:"health"`
	Shed        []string     `json:"shed"`
	// Line is a queue or lottery activity's line: its state is beside the gate.
	Line *sale.LineStats `json:"line,omitempty"`
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	v, err := s.statsOf(r.Context(), r.PathValue("id"), s.health.Level())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// statsOf is an activity's stats as a node at level can answer them: all of them (a
// StatsResponse); otherwise a ShedStatsResponse of what its dependencies still answer. At
// degraded the database's counts are shed; a gate that does not answer (Redis failing over)
// sheds its own numbers, and a database that does not, its counts. Only an activity that does
// not exist is an error: an admin watching a failover keeps seeing what is known. The stats
// endpoint and the live stream both answer with it.
func (s *Server) statsOf(ctx context.Context, id string, level health.Level) (any, error) {
	if level != health.Degraded {
		st, err := s.svc.Stats(ctx, id)
		if err == nil {
			resp := StatsResponse{Stats: st, Health: level}
			if u, err := s.svc.LeaderboardUsage(ctx, id); err == nil {
				resp.Leaderboard = &u
			}
			return resp, nil
		}
		if !errors.Is(err, sale.ErrBusy) {
			return nil, err
		}
	}
	a, err := s.svc.Activity(ctx, id)
	if err != nil {
		return nil, err
	}
	resp := ShedStatsResponse{Stock: a.Stock, Health: level}
	switch st, err := s.svc.GateStats(ctx, id); {
	case err == nil:
		resp.Remaining, resp.Grabbed, resp.Line = &st.Remaining, &st.Grabbed, st.Line
	case errors.Is(err, sale.ErrBusy):
		resp.Shed = append(resp.Shed, "gate")
	default:
		return nil, err
	}
	if level == health.Degraded {
		resp.Shed = append(resp.Shed, "counts")
		return resp, nil
	}
	switch c, err := s.svc.Counts(ctx, id); {
	case err == nil:
		resp.Orders, resp.Created, resp.Paid, resp.Cancelled = &c.Orders, &c.Created, &c.Paid, &c.Cancelled
		resp.Expired, resp.Failed, resp.DeadLetters = &c.Expired, &c.Failed, &c.DeadLetters
	case errors.Is(err, sale.ErrBusy):
		resp.Shed = append(resp.Shed, "counts")
	default:
		return nil, err
	}
	return resp, nil
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.svc.Reconcile(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// ActivityResponse is the public view of an activity.
type ActivityResponse struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Kind         sale.Kind `json:"kind"`
	Status       string    `json:"status"` // upcoming, active, sold_out, ended
	Stock        int64     `json:"stock"`
	Remaining    *int64    `json:"remaining"` // approximate: the gate's count when asked; null when shed
	PriceCents   int64     `json:"price_cents,omitempty"`
	TotalCents   int64     `json:"total_cents,omitempty"`
	PerUserLimit int64     `json:"per_user_limit"`
	StartAt      time.Time `json:"start_at"`
	EndAt        time.Time `json:"end_at"`
	PayWindowS   int64     `json:"pay_window_s"`
	NowMS        int64     `json:"now_ms"`
	// RequireChallenge says grabs need a solved challenge's path token.
	RequireChallenge bool `json:"require_challenge"`
	// Admission is direct, queue or lottery; Line describes a queue or lottery's line.
	Admission sale.Admission `json:"admission"`
	Line      *LineResponse  `json:"line,omitempty"`
}

// LineResponse is the public view of a line. DrawCommitment (the seed's SHA-256) is public from
// the creation; DrawSeed once the early crowd is drawn, with its entries at EntriesURL.
type LineResponse struct {
	AdmitRate      int64   `json:"admit_rate"`
	QueueCap       int64   `json:"queue_cap"`
	Joined         int64   `json:"joined"`
	Waiting        int64   `json:"waiting"`
	Early          int64   `json:"early"`
	Sealed         bool    `json:"sealed"`
	DrainRate      float64 `json:"drain_rate"`
	DrawCommitment string  `json:"draw_commitment"`
	DrawSeed       string  `json:"draw_seed,omitempty"`
	EntriesURL     string  `json:"entries_url,omitempty"`
}

func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The remaining count is a courtesy that costs a gate call per page view: a node that is not
	// at level normal sheds it and says sold out only when its local flag knows.
	var rem *int64
	soldOut := s.svc.SoldOut(a.ID)
	if s.health.Level() == health.Normal {
		n, err := s.svc.Remaining(r.Context(), a.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rem, soldOut = &n, n == 0
	}
	view := publicView(a, rem, soldOut, s.svc.Now())
	if a.Lined() {
		st, err := s.svc.LineState(r.Context(), a)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		view.Line = lineView(a, st)
	}
	writeJSON(w, http.StatusOK, view)
}

// lineView is the public view of a's line in state st.
func lineView(a sale.Activity, st sale.LineState) *LineResponse {
	v := &LineResponse{AdmitRate: a.AdmitRate, QueueCap: a.QueueCap, Joined: st.Joined, Waiting: st.Waiting(),
		Early: st.Early, Sealed: st.Sealed, DrainRate: st.Rate, DrawCommitment: a.Seed.Commitment()}
	if st.Drawn {
		v.DrawSeed, v.EntriesURL = a.Seed.String(), "/api/activities/"+a.ID+"/entries"
	}
	return v
}

// entries lists the draw's entries, one token a line, sorted: with the revealed seed anyone
// recomputes the draw (seckill draw).
func (s *Server) entries(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tokens, err := s.svc.Entries(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=60")
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, t := range tokens {
		bw.WriteString(t)
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// publicView is what anyone may see of activity a at now: rem is the gate's remaining count, or
// nil when it was not asked (soldOut then says what this node's flag knows).
func publicView(a sale.Activity, rem *int64, soldOut bool, now time.Time) ActivityResponse {
	status := "active"
	switch {
	case now.Before(a.StartAt):
		status = "upcoming"
	case !now.Before(a.EndAt):
		status = "ended"
	case soldOut:
		status = "sold_out"
	}
	return ActivityResponse{
		ID: a.ID, Name: a.Name, Kind: a.Kind, Status: status, Stock: a.Stock, Remaining: rem,
		PriceCents: a.PriceCents, TotalCents: a.TotalCents, PerUserLimit: a.PerUserLimit,
		StartAt: a.StartAt, EndAt: a.EndAt, PayWindowS: int64(a.PayWindow / time.Second), NowMS: now.UnixMilli(),
		RequireChallenge: a.RequireChallenge, Admission: a.Admission,
	}
}

// GrabResponse is the 202 answer to a grab.
type GrabResponse struct {
	Status      string `json:"status"`
	OrderToken  string `json:"order_token"`
	AmountCents int64  `json:"amount_cents"` // the share won (red packet) or the price (item)
}

// GrabBody is what a grab may carry: nothing, or a JSON object of these fields (none yet). A
// field the grab does not define is refused, so that one a client believes in (a quantity) is
// never silently ignored.
type GrabBody struct{}

// grab is the hot path. Once an activity is sold out, the crowd is turned away by the local
// sold-out flag before its token is even checked: 410 is public knowledge, and the check costs
// more than the answer. A retry carrying an Idempotency-Key goes through, as it may be owed its
// first answer. The body is checked once the caller is known, before the risk rules and the gate
// see the grab. The route with a path token ({pass}) is the hidden grab path a solved challenge
// reveals; the gate spends the token with the grab.
func (s *Server) grab(w http.ResponseWriter, r *http.Request) {
	start, outcome, id := requestStart(w), "won", r.PathValue("id")
	defer func() {
		d := time.Since(start)
		s.observe.Grab(outcome, d)
		if _, known := s.svc.Known(id); known { // made-up ids must not grow the tracker
			s.live.Record(id, stageOf(outcome), d)
		}
	}()
	key, err := idempotencyKey(r)
	if err != nil {
		outcome = outcomeOf(err)
		s.writeError(w, r, err)
		return
	}
	pass := r.PathValue("pass")
	user, name, err := s.edge(w, r, id, key != "")
	if err == nil {
		err = decodeEmpty(w, r, &GrabBody{})
	}
	if err == nil {
		name, err = s.vet(r, id, user, pass)
	}
	var a sale.Activity
	if err == nil {
		a, err = s.svc.Activity(r.Context(), id)
	}
	if err == nil && a.Lined() {
		var t sale.TicketView
		var fresh bool
		if t, fresh, err = s.svc.Join(r.Context(), id, user, pass); err == nil {
			status := "JOINED"
			outcome = "joined"
			if !fresh {
				outcome, status = "already_queued", "ALREADY_QUEUED"
			}
			writeJSON(w, http.StatusAccepted, ticketResponse(t, a.StartAt, status))
			return
		}
	} else if err == nil {
		var g sale.Grab
		g, err = s.svc.Grab(r.Context(), sale.GrabRequest{ActivityID: id, UserID: user, IdempotencyKey: key, Pass: pass})
		if err == nil {
			writeJSON(w, http.StatusAccepted, GrabResponse{Status: "QUEUED", OrderToken: g.Token, AmountCents: g.AmountCents})
			return
		}
	}
	outcome = outcomeOr(name, err)
	s.writeError(w, r, err)
}

// override applies an activity's own rate (sale.Pick) to the node's rule; the burst of a token
// bucket follows its rate (a window has none).
func override(node ratelimit.Rule, own int64) ratelimit.Rule {
	if own == 0 {
		return node
	}
	r := int(sale.Pick(own, int64(node.PerSecond)))
	return ratelimit.Rule{PerSecond: r, Burst: r}
}

// vet asks the risk rules about a grab that passed the edge: a blocked one is refused, and one
// the rules want challenged must carry a pass (which the gate then checks). A degraded node
// skips the rules: the blacklist and the token are its whole defence, as the design documents
// have it.
func (s *Server) vet(r *http.Request, id, user, pass string) (outcome string, err error) {
	if s.risk == nil || s.health.Level() == health.Degraded {
		return "", nil
	}
	v := s.risk.Grab(risk.Signal{IP: s.clientIP(r), User: user, Activity: id, At: s.svc.Now()})
	switch {
	case v.Decision == risk.Block:
		return "risk_block", fmt.Errorf("%w: refused by the risk rule %s", sale.ErrBlocked, v.Rule)
	case v.Decision == risk.Challenge && pass == "":
		return "risk_challenge", fmt.Errorf("%w: the risk rule %s asks for a challenge", sale.ErrChallengeRequired, v.Rule)
	}
	return "", nil
}

// edge runs the layers in front of the gate for a request about activity id, cheapest first:
// the local sold-out flag (unless retry, a request that may be owed an earlier answer), the
// client IP's rate limit and block, the user's token and block, the user's and the activity's
// rate limits. It returns the user, or the error to answer with and, when the error alone does
// not say which layer refused, the outcome to count.
func (s *Server) edge(w http.ResponseWriter, r *http.Request, id string, retry bool) (user, outcome string, err error) {
	if !retry && s.svc.SoldOut(id) {
		return "", "sold_out_edge", sale.ErrSoldOut
	}
	// An activity may set its own limits; it is known here once this node has read it.
	perIP, perUser, perAct := s.limits.PerIP, s.limits.PerUser, s.limits.PerActivity
	userKey := "user:"
	if a, ok := s.svc.Known(id); ok && a.Rates != (sale.Rates{}) {
		perIP = override(perIP, a.Rates.PerIP)
		perUser = override(perUser, a.Rates.PerUser)
		perAct = override(perAct, a.Rates.Global)
		userKey = "user:" + id + ":" // its own budget, apart from the node's
	}
	ip := s.clientIP(r)
	if !perIP.Off() {
		if err := s.limit(w, r, s.limits.Windows, "ip:"+ip.String(), perIP); err != nil {
			return "", limitOutcome(err, "ip"), err
		}
	}
	if s.svc.IPBlocked(ip) {
		return "", "blocked_ip", sale.ErrBlocked
	}
	if user, err = s.authenticate(r); err != nil {
		return "", "", err
	}
	if s.svc.UserBlocked(user) {
		return "", "blocked_user", sale.ErrBlocked
	}
	if err := s.limit(w, r, s.limits.Buckets, userKey+user, perUser); err != nil {
		return "", limitOutcome(err, "user"), err
	}
	if err := s.limit(w, r, s.limits.Buckets, "act:"+id, perAct); err != nil {
		return "", limitOutcome(err, "activity"), err
	}
	return user, "", nil
}

// OrderResponse is an order as its owner sees it.
type OrderResponse struct {
	Status      sale.Status `json:"status"`
	OrderID     int64       `json:"order_id,omitempty"`
	OrderToken  string      `json:"order_token"`
	ActivityID  string      `json:"activity_id"`
	AmountCents int64       `json:"amount_cents"`
	Reason      string      `json:"reason,omitempty"`
	CreatedAt   time.Time   `json:"created_at"`
	ExpiresAt   *time.Time  `json:"expires_at,omitempty"`
	ClosedAt    *time.Time  `json:"closed_at,omitempty"`
}

func orderResponse(o sale.Order) OrderResponse {
	resp := OrderResponse{Status: o.Status, OrderID: o.ID, OrderToken: o.Token, ActivityID: o.ActivityID,
		AmountCents: o.AmountCents, Reason: o.Reason, CreatedAt: o.CreatedAt}
	if !o.ExpiresAt.IsZero() && o.Status != sale.StatusFailed {
		resp.ExpiresAt = &o.ExpiresAt
	}
	if !o.ClosedAt.IsZero() {
		resp.ClosedAt = &o.ClosedAt
	}
	return resp
}

func (s *Server) order(w http.ResponseWriter, r *http.Request, user string) {
	o, err := s.svc.Order(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}

func (s *Server) pay(w http.ResponseWriter, r *http.Request, user string) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.Pay(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, user string) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.Cancel(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}
