package sale

import (
	"context"
	"time"
)

// AuditEntry is one admin action, as the audit log keeps it: who (the admin token's name), what
// (the request's method and route, and the activity or entry it named), when, from where (the
// client address), and how it ended (the HTTP status).
type AuditEntry struct {
	ID     int64 // given by the log, rising
	At     time.Time
	Actor  string
	Action string // e.g. "POST /api/admin/activities"
	Target string // the activity id, or the blacklist entry, the action named; "" for none
	Remote string
	Status int
}

// The bounds of an entry's texts: what the log's columns hold.
const (
	MaxAuditActor  = 64
	MaxAuditAction = 128
	MaxAuditTarget = 255
	MaxAuditRemote = 64
)

// Audit is the audit log of the admin actions: a feature of its own, on its store.
type Audit struct {
	store AuditStore
	now   func() time.Time
}

// NewAudit returns the audit log kept by store, on the clock now (nil: time.Now).
func NewAudit(store AuditStore, now func() time.Time) *Audit {
	if now == nil {
		now = time.Now
	}
	return &Audit{store: store, now: now}
}

// Record records e in the audit log, its texts cut to the log's bounds. Errors: ErrBusy.
func (s *Audit) Record(ctx context.Context, e AuditEntry) error {
	e.Actor, e.Action = cut(e.Actor, MaxAuditActor), cut(e.Action, MaxAuditAction)
	e.Target, e.Remote = cut(e.Target, MaxAuditTarget), cut(e.Remote, MaxAuditRemote)
	if e.At.IsZero() {
		e.At = s.now()
	}
	e.At = e.At.UTC().Truncate(time.Millisecond)
	return s.store.Record(ctx, e)
}

// Entries returns up to limit (1 to MaxPage) entries of the audit log older than the entry
// before (0: the newest), the newest first. Errors: ErrInvalid, ErrBusy.
func (s *Audit) Entries(ctx context.Context, before int64, limit int) ([]AuditEntry, error) {
	if err := checkPage(limit, before, "entry id"); err != nil {
		return nil, err
	}
	return s.store.Entries(ctx, before, limit)
}

// cut is s shortened to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
