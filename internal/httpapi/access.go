package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// Role is what an admin token may do with the admin API.
type Role string

const (
	// RoleViewer reads: stats, the live view, the blacklist, the audit log (dashboards).
	RoleViewer Role = "viewer"
	// RoleOperator does everything: creates activities, reconciles, changes the blacklist.
	RoleOperator Role = "operator"
)

// Admin is one admin token: its name (who, in the audit log), its role and its secret.
type Admin struct {
	Name  string
	Role  Role
	Token string
}

// admin checks the admin bearer token against every configured one, in constant time and
// without stopping at a match, and lets h run if its role may do need. An operator's every
// request, and every request refused for want of a role, goes to the audit log with its answer.
func (s *Server) admin(need Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		found := -1
		for i, a := range s.admins {
			if auth.Equal(tok, a.Token) && ok {
				found = i
			}
		}
		if found < 0 {
			s.writeError(w, r, errBadAdmin)
			return
		}
		a := s.admins[found]
		if need == RoleOperator && a.Role != RoleOperator {
			s.writeError(w, r, fmt.Errorf("%w: the admin token %q may only read", sale.ErrForbidden, a.Name))
			s.record(r, a, http.StatusForbidden, "")
			return
		}
		if need == RoleViewer {
			h(w, r)
			return
		}
		note := &auditNote{}
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, note)))
		s.record(r, a, sw.status(), note.target)
	}
}

// auditKey carries an operator's request's auditNote, where its handler names its target.
type auditKey struct{}

type auditNote struct{ target string }

// noteTarget names what an operator's request acted on (an activity created, a blacklist entry
// added), when its route does not say.
func noteTarget(r *http.Request, target string) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.target = target
	}
}

// auditWithin bounds an audit log write: it outlives the request, not the node.
const auditWithin = 2 * time.Second

// record records a's request r, answered status, in the audit log (a node without one keeps
// none). A log that cannot be written is reported in the node's log: the action itself is done
// (or refused) already.
func (s *Server) record(r *http.Request, a Admin, status int, target string) {
	if s.audit == nil {
		return
	}
	if target == "" {
		target = r.PathValue("id")
		if kind := r.PathValue("kind"); kind != "" {
			target = kind + ":" + r.PathValue("value")
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditWithin)
	defer cancel()
	e := sale.AuditEntry{Actor: a.Name, Action: r.Method + " " + routeOf(r), Target: target,
		Remote: s.clientIP(r).String(), Status: status}
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.WarnContext(r.Context(), "audit log", "err", err, "actor", e.Actor, "action", e.Action, "target", e.Target)
	}
}

// routeOf is r's route, without its method: the pattern it was served by.
func routeOf(r *http.Request) string {
	p := r.Pattern
	for i := 0; i < len(p); i++ {
		if p[i] == ' ' {
			return p[i+1:]
		}
	}
	return p
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// auditLog answers GET /api/admin/audit?limit=N&before=ID (limit 1 to sale.MaxPage, defaultPage
// when left out).
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, before := queryInt(q.Get("limit"), defaultPage), queryInt64(q.Get("before"))
	es, err := s.audit.Entries(r.Context(), before, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var resp wire.AuditResponse
	resp.Entries, resp.Next = page(es, limit, func(e sale.AuditEntry) wire.AuditEntryResponse {
		return wire.AuditEntryResponse{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target,
			Remote: e.Remote, Status: e.Status}
	}, func(e sale.AuditEntry) int64 { return e.ID })
	writeJSON(w, http.StatusOK, resp)
}
