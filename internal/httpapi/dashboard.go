package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// MaxStreams bounds the live streams one node serves at once: each reads the stats every tick.
const MaxStreams = 32

// StreamTick is how often a live stream sends an event.
const StreamTick = time.Second

// events streams an activity's live view as Server-Sent Events, one "stats" event per
// StreamTick, until the client goes away or the server shuts down (StopStreams). The admin
// token travels in the Authorization header, so the dashboard reads the stream with fetch
// rather than EventSource (which cannot send headers) and no token ever sits in a URL or a log.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.svc.Activity(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	if n := s.streams.Add(1); n > MaxStreams {
		s.streams.Add(-1)
		s.writeError(w, r, fmt.Errorf("%w: %d live streams are open on this node already", sale.ErrBusy, MaxStreams))
		return
	}
	defer s.streams.Add(-1)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(StreamTick)
	defer tick.Stop()
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", 2*StreamTick/time.Millisecond); err != nil {
		return
	}
	for {
		b, err := json.Marshal(s.liveEvent(r, id))
		if err != nil {
			s.log.ErrorContext(r.Context(), "encode live event", "err", err)
			return
		}
		// Each write gets its own deadline: the server's WriteTimeout would end the stream.
		rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "event: stats\ndata: %s\n\n", b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// liveEvent reads an activity's stats the way the stats endpoint does (shed on a degraded node).
func (s *Server) liveEvent(r *http.Request, id string) wire.LiveEvent {
	ev := wire.LiveEvent{AtMS: s.svc.Now().UnixMilli(), Health: s.health.Level(), Node: s.live.View(id)}
	v, err := s.statsOf(r.Context(), id, ev.Health)
	if err != nil {
		_, code := Classify(err)
		msg := err.Error()
		if code == wire.CodeInternal {
			msg = "internal error"
		}
		ev.StatsError = &wire.Error{Code: code, Message: msg}
		return ev
	}
	ev.Stats = v
	return ev
}

// StopStreams ends every live stream, as the server shuts down: http.Server.Shutdown waits for
// handlers, and a stream would otherwise hold it until its timeout.
func (s *Server) StopStreams() {
	s.stopOnce.Do(func() { close(s.stop) })
}
