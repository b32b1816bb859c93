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
	// LeadingEdge pushes an isolated change at once: an event that arrives
	// after a quiet spell of at least DebounceAfter, with nothing pending,
	// is pushed without waiting. Events that follow within the quiet period
	// are merged as usual. Off, every push waits for a quiet period (as
	// Istio does).
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
	opts      Options
	pending   Request
	first     time.Time // first pending event
	last      time.Time // latest pending event
	lastEvent time.Time // latest event seen, pushed or not
}

// event records ev at now. It returns a request to push at once (leading
// edge) or nil.
func (s *state) event(now time.Time, ev model.Event) *Request {
	quiet := s.lastEvent.IsZero() || now.Sub(s.lastEvent) >= s.opts.DebounceAfter
	s.lastEvent = now
	if s.opts.LeadingEdge && quiet && s.pending.Events == 0 {
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
