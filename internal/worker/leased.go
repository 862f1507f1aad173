package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"seckill/internal/sale"
)

// Reconciler compares, every Every, the gate of each activity that has not ended with what the
// database and the queue say: the scheduled reconciliation. One node of many does it at a time,
// the one holding the lease "reconcile"; the others skip their turn. It reports by default
// (Service.Check) and repairs only with Repair (Service.Reconcile); either is safe under live
// traffic, since a drift is concluded only when seen twice with the gate at rest.
type Reconciler struct {
	Service *sale.Service
	Lease   sale.Lease
	Holder  string // this node's name, unique among the nodes
	Every   time.Duration
	Repair  bool
	Log     *slog.Logger
	// Checked, when set, is told of each activity's reconciliation (metrics); Done of each round
	// this node held the lease for, with the activities it checked.
	Checked func(activityID string, rec sale.Reconciliation, err error)
	Done    func(checked []string)
}

// ReconcileLease is the lease a Reconciler holds for its rounds.
const ReconcileLease = "reconcile"

// Run reconciles every Every until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	for sleep(ctx, r.Every) {
		r.Round(ctx)
	}
}

// Round runs one round: if this node holds the lease, every current activity is reconciled. It
// reports whether it held the lease.
func (r *Reconciler) Round(ctx context.Context) bool {
	if !hold(ctx, r.Lease, ReconcileLease, r.Holder, r.Every, r.Log) {
		return false
	}
	check := r.Service.Check
	if r.Repair {
		check = r.Service.Reconcile
	}
	var checked []string
	for _, a := range r.Service.Current() {
		if ctx.Err() != nil {
			return true
		}
		rec, err := check(ctx, a.ID)
		switch {
		case err != nil:
			r.Log.Warn("reconcile", "activity", a.ID, "err", err)
		case rec.Outcome == sale.ReconcileDrift || rec.Outcome == sale.ReconcileRepaired:
			r.Log.Warn("reconcile: the gate drifted from the database", "activity", a.ID, "drift", rec.Drift,
				"gate_remaining", rec.GateRemaining, "expected_remaining", rec.ExpectedRemaining, "repaired", rec.Repaired)
		}
		if r.Checked != nil {
			r.Checked(a.ID, rec, err)
		}
		checked = append(checked, a.ID)
	}
	if r.Done != nil {
		r.Done(checked)
	}
	return true
}

// hold takes or extends the lease name for holder, for a job run every every: the lease outlives
// the period by half, so that its holder keeps it from round to round and another node takes
// over within one and a half periods of its going quiet.
func hold(ctx context.Context, lease sale.Lease, name, holder string, every time.Duration, log *slog.Logger) bool {
	held, err := lease.Hold(ctx, name, holder, every+every/2)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Warn("lease", "name", name, "err", err)
		}
		return false
	}
	return held
}

// Archiver archives, every Every, the activities whose pay windows closed more than Keep ago
// (Service.ArchiveDue): their hot state in Redis or in the process is dropped, the database
// answers for them. One node of many does it, the one holding the lease "archive".
type Archiver struct {
	Service *sale.Service
	Lease   sale.Lease
	Holder  string
	Every   time.Duration
	Keep    time.Duration
	Log     *slog.Logger
}

// ArchiveLease is the lease an Archiver holds for its rounds.
const ArchiveLease = "archive"

// Run archives every Every until ctx ends.
func (a *Archiver) Run(ctx context.Context) { a.job().run(ctx) }

// Round archives what is due if this node holds the lease; it returns how many it archived.
func (a *Archiver) Round(ctx context.Context) int { return a.job().round(ctx) }

func (a *Archiver) job() leasedJob {
	return leasedJob{lease: a.Lease, name: ArchiveLease, holder: a.Holder, every: a.Every, log: a.Log,
		what: "archive", did: "archived activities",
		do: func(ctx context.Context) (int, error) { return a.Service.ArchiveDue(ctx, a.Keep) }}
}

// EventPurger deletes, every Every, the order events that every sink took more than Keep ago,
// with their deliveries (Outbox.Purge): the outbox keeps what is not yet delivered
// everywhere and what a receiver might still ask for again. One node of many does it, the one
// holding the lease "events"; a round that outlasts the lease and meets another node's is
// harmless, each delete checking again what it deletes.
type EventPurger struct {
	Outbox *sale.Outbox
	Lease  sale.Lease
	Holder string
	Every  time.Duration
	Keep   time.Duration
	Log    *slog.Logger
	// Purged, when set, is told how many events each round deleted (metrics).
	Purged func(n int)
}

// EventsLease is the lease an EventPurger holds for its rounds.
const EventsLease = "events"

// Run purges every Every until ctx ends.
func (p *EventPurger) Run(ctx context.Context) { p.job().run(ctx) }

// Round purges what is due if this node holds the lease; it returns how many events it deleted.
func (p *EventPurger) Round(ctx context.Context) int { return p.job().round(ctx) }

func (p *EventPurger) job() leasedJob {
	return leasedJob{lease: p.Lease, name: EventsLease, holder: p.Holder, every: p.Every, log: p.Log,
		what: "purge the order events", did: "purged delivered order events", done: p.Purged,
		do: func(ctx context.Context) (int, error) { return p.Outbox.Purge(ctx, p.Keep) }}
}

// WaveOpener opens, every Every, the waves of the reservation sales that have started
// (Reservations.OpenDue): their reservations close, their waves are assigned and the gate is
// given the reservers, once at the start and again whenever it lost them. One node of many
// does it, the one holding the lease "waves"; a round that outlasts the lease (a million
// reservers) and meets another node's does the same work twice, harmlessly.
type WaveOpener struct {
	Reservations *sale.Reservations
	Lease        sale.Lease
	Holder       string
	Every        time.Duration
	Log          *slog.Logger
}

// WavesLease is the lease a WaveOpener holds for its rounds.
const WavesLease = "waves"

// Run opens what is due every Every until ctx ends.
func (w *WaveOpener) Run(ctx context.Context) { w.job().run(ctx) }

// Round opens what is due if this node holds the lease; it returns how many reservers it gave
// the gate.
func (w *WaveOpener) Round(ctx context.Context) int { return w.job().round(ctx) }

func (w *WaveOpener) job() leasedJob {
	return leasedJob{lease: w.Lease, name: WavesLease, holder: w.Holder, every: w.Every, log: w.Log,
		what: "open the reservation sales' waves", did: "gave the gate the reservers of the sales started",
		do: w.Reservations.OpenDue}
}

// WaveReminder writes, every Every, the reminders of the reservation sales' waves that open
// within Before (sale.Reservations.RemindDue), on the node that holds the lease "reminders".
type WaveReminder struct {
	Reservations *sale.Reservations
	Before       time.Duration
	Lease        sale.Lease
	Holder       string
	Every        time.Duration
	Log          *slog.Logger
}

// RemindersLease is the lease a WaveReminder holds for its rounds.
const RemindersLease = "reminders"

// Run writes the reminders due every Every until ctx ends.
func (w *WaveReminder) Run(ctx context.Context) { w.job().run(ctx) }

// Round writes the reminders due if this node holds the lease; it returns how many it wrote.
func (w *WaveReminder) Round(ctx context.Context) int { return w.job().round(ctx) }

func (w *WaveReminder) job() leasedJob {
	return leasedJob{lease: w.Lease, name: RemindersLease, holder: w.Holder, every: w.Every, log: w.Log,
		what: "remind of the reservation sales' waves", did: "wrote the reminders of the waves opening soon",
		do: func(ctx context.Context) (int, error) { return w.Reservations.RemindDue(ctx, w.Before) }}
}

// leasedJob is a job one node of many runs every every, the one holding the lease name: each
// round does do, logs what it did (did) or why it failed (what), and tells done how many.
type leasedJob struct {
	lease     sale.Lease
	name      string
	holder    string
	every     time.Duration
	log       *slog.Logger
	what, did string
	do        func(ctx context.Context) (int, error)
	done      func(n int)
}

func (j leasedJob) run(ctx context.Context) {
	for sleep(ctx, j.every) {
		j.round(ctx)
	}
}

func (j leasedJob) round(ctx context.Context) int {
	if !hold(ctx, j.lease, j.name, j.holder, j.every, j.log) {
		return 0
	}
	n, err := j.do(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		j.log.Warn(j.what, "err", err)
	}
	if n > 0 {
		j.log.Info(j.did, "count", n)
		if j.done != nil {
			j.done(n)
		}
	}
	return n
}
