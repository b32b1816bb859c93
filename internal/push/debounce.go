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
	// can: an event that arrives at least DebounceAfter after the previous
	// push, with nothing pending, is pushed without waiting; later events
	// are merged and pushed together DebounceAfter after that push. A
	// burst is thus merged into one push per DebounceAfter, and under a
	// steady stream of changes no change waits longer than DebounceAfter
	// (a quiet period would never come, and every change would wait for
	// DebounceMax). Off, every push waits for a quiet period of
	// DebounceAfter, at most DebounceMax (as Istio does).
	LeadingEdge bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

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
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// state is the debounce logic, free of goroutines and timers: it is fed
// events and clock ticks with their times and says when to push.
type state struct {
	opts     Options
	pending  Request
	first    time.Time // first pending event
	last     time.Time // latest pending event
	lastPush time.Time // latest push (leading edge only)
}

// event records ev at now. It returns a request to push at once (leading
// edge) or nil.
func (s *state) event(now time.Time, ev model.Event) *Request {
	if s.opts.LeadingEdge && s.pending.Events == 0 &&
		(s.lastPush.IsZero() || now.Sub(s.lastPush) >= s.opts.DebounceAfter) {
		s.lastPush = now
		var r Request
		r.Add(ev, now)
		return &r
	}
	if s.pending.Events == 0 {
		s.first = now
	}
	s.last = now
	s.pending.Add(ev, now)
	return nil
}

// deadline is when the pending events are due; zero when none pend.
func (s *state) deadline() time.Time {
	if s.pending.Events == 0 {
		return time.Time{}
	}
	if s.opts.LeadingEdge {
		return s.lastPush.Add(s.opts.DebounceAfter)
	}
	quiet := s.last.Add(s.opts.DebounceAfter)
	max := s.first.Add(s.opts.DebounceMax)
	if max.Before(quiet) {
		return max
	}
	return quiet
}

// tick returns the pending request when it is due at now, else nil.
func (s *state) tick(now time.Time) *Request {
	dl := s.deadline()
	if dl.IsZero() || now.Before(dl) {
		return nil
	}
	r := s.pending
	s.pending = Request{}
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
	mu    sync.Mutex
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
	t := d.opts.Now()
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
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var timerC <-chan time.Time
		if dl := st.deadline(); !dl.IsZero() {
			timer.Reset(max(dl.Sub(d.opts.Now()), 0))
			timerC = timer.C
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
			for _, e := range evs {
				if r := st.event(e.t, e.ev); r != nil {
					d.push(*r)
				}
			}
		case <-timerC:
		}
		if r := st.tick(d.opts.Now()); r != nil {
			d.push(*r)
		}
	}
}
