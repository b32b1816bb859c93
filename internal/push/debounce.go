package push

import (
	"context"
	"sync"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Defaults of Options.
const (
	DefaultDebounceAfter = 100 * time.Millisecond
	DefaultDebounceMax   = time.Second
)

// Options configure a Debouncer.
type Options struct {
	// DebounceAfter is the quiet period: pending events are pushed once no
	// new event arrived for this long. Zero means DefaultDebounceAfter.
	DebounceAfter time.Duration
	// DebounceMax bounds the delay of the first pending event: a steady
	// stream of events is still pushed this often. Zero means
	// DefaultDebounceMax.
	DebounceMax time.Duration
	// LeadingEdge pushes at most once per DebounceAfter, at once when it
	// can: events handled at least DebounceAfter after the previous push
	// started, with nothing pending, are pushed without waiting; later
	// events are merged and pushed together DebounceAfter after that push
	// started. A burst is thus merged into one push per DebounceAfter, and
	// under a steady stream of changes no change waits longer than
	// DebounceAfter (a quiet period would never come, and every change
	// would wait for DebounceMax). When a push takes longer than
	// DebounceAfter, everything that arrived during it goes out in one
	// push as soon as it ends. Off, every push waits for a quiet period of
	// DebounceAfter, at most DebounceMax (as Istio does).
	//
	// Either way a removal is never pushed at once: the push that carries
	// it waits until DebounceAfter after Run handled it, so that a delete
	// followed by a create within that time (kubectl replace --force, a
	// Helm upgrade) reaches clients as one change, never as a deletion. A
	// removal is a service deleted, or left without endpoints
	// (model.Event.NoEndpoints); and, while one pends, the service created
	// again still without endpoints, since its EndpointSlice follows the
	// Service. A stream of removals holds a push for at most DebounceMax
	// after the first of them.
	LeadingEdge bool
	// Clock is the time source; nil means the system clock.
	Clock Clock
}

// Clock is what a Debouncer reads the time from and waits on. Tests
// supply one whose time moves only when they say so.
type Clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() Timer
}

// Timer is a resettable one-shot timer, like time.Timer: after Reset or
// Stop returns, C delivers no value from an earlier arming.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return systemTimer{t}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time   { return t.t.C }
func (t systemTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t systemTimer) Stop()                 { t.t.Stop() }

func (o Options) withDefaults() Options {
	if o.DebounceAfter <= 0 {
		o.DebounceAfter = DefaultDebounceAfter
	}
	if o.DebounceMax <= 0 {
		o.DebounceMax = DefaultDebounceMax
	}
	if o.DebounceMax < o.DebounceAfter {
		o.DebounceMax = o.DebounceAfter
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	return o
}

// state is the debounce logic, free of goroutines and timers. Run adds
// the events it takes from its inbox, each with its arrival time, then
// asks at the clock's time whether a push is due.
//
// The leading edge is decided when Run processes the events, not when
// they arrived: while a push runs, events queue in the inbox, and Run adds
// them all before it asks, so a backlog goes out as one push. Deciding on
// arrival times gave every queued event that arrived DebounceAfter after
// the previous one a push of its own: behind slow pushes the backlog was
// sent one event per push and the lag grew without bound. The trailing
// edge's quiet period is about the events themselves, so it is measured
// from their arrival; and a request's Start stays the earliest arrival,
// for convergence metrics.
//
// Removals hold the pending push for DebounceAfter after Run handled them
// (see Options.LeadingEdge). Holding the whole push, not only the removed
// hostnames, keeps the interim state from clients: the xDS server
// regenerates from the live model, and a push for another service would
// re-evaluate, say, a listener response that also names the removed one.
type state struct {
	opts    Options
	pending Request
	first   time.Time // arrival of the first pending event
	last    time.Time // arrival of the latest pending event
	// lastPush is when the latest push was decided (leading edge only).
	lastPush time.Time
	// removed are the hostnames of the pending removals. The first was
	// handled at holdFrom, the latest at holdUntil - DebounceAfter; both
	// zero when none pends.
	removed             map[model.Hostname]struct{}
	holdFrom, holdUntil time.Time
}

// add records events taken from the inbox at now.
func (s *state) add(now time.Time, evs []timedEvent) {
	for _, e := range evs {
		if s.pending.Events == 0 {
			s.first = e.t
		}
		s.last = e.t
		s.pending.Add(e.ev, e.t)
		if s.isRemoval(e.ev) {
			if s.holdFrom.IsZero() {
				s.holdFrom = now
			}
			s.holdUntil = now.Add(s.opts.DebounceAfter)
			if s.removed == nil {
				s.removed = map[model.Hostname]struct{}{}
			}
			s.removed[e.ev.Hostname] = struct{}{}
		}
	}
}

// isRemoval reports whether ev takes away what clients were given (the
// service deleted, its last endpoints gone) or is the create of a
// replace: the service back, still without endpoints, while its removal
// pends. A service created without endpoints otherwise is no removal.
func (s *state) isRemoval(ev model.Event) bool {
	if !ev.NoEndpoints {
		return false
	}
	if ev.Kind == model.ServiceChanged {
		_, pending := s.removed[ev.Hostname]
		return pending
	}
	return true
}

// deadline is when the pending events are due; zero when none pend.
func (s *state) deadline() time.Time {
	if s.pending.Events == 0 {
		return time.Time{}
	}
	due := s.unheldDeadline()
	if s.holdUntil.IsZero() {
		return due
	}
	hold := earliest(s.holdUntil, s.holdFrom.Add(s.opts.DebounceMax))
	if hold.After(due) {
		return hold
	}
	return due
}

// unheldDeadline is when the pending events would be due without removals.
func (s *state) unheldDeadline() time.Time {
	if s.opts.LeadingEdge {
		if s.lastPush.IsZero() {
			return s.first // no push yet: due at once
		}
		return s.lastPush.Add(s.opts.DebounceAfter)
	}
	return earliest(s.last.Add(s.opts.DebounceAfter), s.first.Add(s.opts.DebounceMax))
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// tick returns the pending request when it is due at now, else nil.
func (s *state) tick(now time.Time) *Request {
	dl := s.deadline()
	if dl.IsZero() || now.Before(dl) {
		return nil
	}
	r := s.pending
	s.pending = Request{}
	s.removed, s.holdFrom, s.holdUntil = nil, time.Time{}, time.Time{}
	if s.opts.LeadingEdge {
		s.lastPush = now
	}
	return &r
}

// Debouncer merges model events into push requests. Handle may be called
// from any goroutine and never blocks; Run delivers requests one at a
// time: the next request is built while the previous push runs and is
// delivered when it returns.
type Debouncer struct {
	opts  Options
	push  func(Request)
	wake  chan struct{}
	mu    sync.Mutex // guards inbox
	inbox []timedEvent
}

type timedEvent struct {
	ev model.Event
	t  time.Time
}

// NewDebouncer returns a debouncer that calls push with each request.
func NewDebouncer(opts Options, push func(Request)) *Debouncer {
	return &Debouncer{opts: opts.withDefaults(), push: push, wake: make(chan struct{}, 1)}
}

// Handle queues an event; it is a model.EventHandler.
func (d *Debouncer) Handle(ev model.Event) {
	t := d.opts.Clock.Now()
	d.mu.Lock()
	d.inbox = append(d.inbox, timedEvent{ev, t})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers push requests until ctx is done.
func (d *Debouncer) Run(ctx context.Context) {
	st := &state{opts: d.opts}
	timer := d.opts.Clock.NewTimer()
	defer timer.Stop()
	for {
		var timerC <-chan time.Time
		if dl := st.deadline(); !dl.IsZero() {
			timer.Reset(max(dl.Sub(d.opts.Clock.Now()), 0))
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
			timer.Stop()
			d.mu.Lock()
			evs := d.inbox
			d.inbox = nil
			d.mu.Unlock()
			st.add(d.opts.Clock.Now(), evs)
		case <-timerC:
		}
		if r := st.tick(d.opts.Clock.Now()); r != nil {
			d.push(*r)
		}
	}
}
