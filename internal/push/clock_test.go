package push

import (
	"sync"
	"time"
)

// manualClock is a Clock whose time moves only when the test sets it.
// Run arms its timer just before it waits; the arming is handed to the
// test (armed) and Run goes on only once the test has looked at it
// (resume). The test thus knows when Run is about to wait, and wakes it
// one step at a time, by an event or by firing the timer: the run is the
// same on every machine, however loaded.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	c      chan time.Time
	armed  chan time.Time // the time the timer was armed for
	resume chan struct{}
	done   chan struct{} // closed when the test ends: Reset no longer waits
}

func newManualClock(t0 time.Time) *manualClock {
	return &manualClock{
		now:    t0,
		c:      make(chan time.Time, 1),
		armed:  make(chan time.Time),
		resume: make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock forward to t; it never goes back.
func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// fire moves the clock to at and fires the timer.
func (c *manualClock) fire(at time.Time) {
	c.set(at)
	c.c <- c.Now()
}

// NewTimer returns the clock's one timer: Run uses one.
func (c *manualClock) NewTimer() Timer { return manualTimer{c} }

type manualTimer struct{ c *manualClock }

func (t manualTimer) C() <-chan time.Time { return t.c.c }

func (t manualTimer) Stop() {
	select {
	case <-t.c.c:
	default:
	}
}

func (t manualTimer) Reset(d time.Duration) {
	t.Stop()
	select {
	case t.c.armed <- t.c.Now().Add(d):
		select {
		case <-t.c.resume:
		case <-t.c.done:
		}
	case <-t.c.done:
	}
}
