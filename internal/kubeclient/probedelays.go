package kubeclient

import (
	"math/rand/v2"
	"time"
)

// probeDelays are the intervals between the probes of an unreachable API
// server: Min, doubling up to Max, each spread by up to ±Jitter of itself
// so that several meshpilot replicas (and several API servers' probers)
// do not probe in step. The bound keeps a returning API server found
// within about Max; the floor and the doubling keep a down one from being
// asked more than a few times a second.
type probeDelays struct {
	Min, Max time.Duration
	Jitter   float64
	// rand returns a number in [0, 1); nil is math/rand/v2's.
	rand func() float64
}

// after returns the delay before probe n (0 for the first probe of an
// outage).
func (d probeDelays) after(n int) time.Duration {
	base := d.Min
	for i := 0; i < n && base < d.Max; i++ {
		base *= 2
	}
	base = min(base, d.Max)
	r := d.rand
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(float64(base) * (1 + d.Jitter*(2*r()-1)))
}
