package replicas

import (
	"context"
	"log/slog"
	"time"
)

// Balancing defaults, as the serve flags document them.
const (
	DefaultTolerance = 0.2
	DefaultShedRate  = 2.0
	// DefaultMinAge keeps a client just accepted (perhaps just shed by a
	// peer, or reconnected after a restart) from being bounced again.
	DefaultMinAge = 30 * time.Second
	// balanceTick is how often the balancer looks: often enough that a
	// rate of a few streams a second is spread out rather than bursty.
	balanceTick = 250 * time.Millisecond
)

// BalancerOptions configure a Balancer.
type BalancerOptions struct {
	// View is the replicas' counts (Publisher.View).
	View func() View
	// Clients is this replica's client count now.
	Clients func() int
	// Streams lists the streams that may be shed, and Shed closes some so
	// that their clients reconnect; it returns how many it closed.
	Streams func() []Stream
	Shed    func(ids []int64) int
	// Tolerance is how far above the fair share a replica may hold
	// clients (0.2: 20 %; 0: none, DefaultTolerance is the usual one).
	Tolerance float64
	// Rate is the most streams shed per second; DefaultShedRate when zero.
	Rate float64
	// MinAge is the least time a stream has been open before it may be
	// shed; DefaultMinAge when zero.
	MinAge time.Duration
	Log    *slog.Logger
}

// Balancer sheds the clients a replica holds beyond its fair share, a
// few a second, so that they reconnect through the Service to replicas
// that hold fewer.
type Balancer struct {
	opts  BalancerOptions
	carry float64 // the fraction of a stream the rate allowed, not yet shed
	last  time.Time
}

// NewBalancer fills in the defaults.
func NewBalancer(opts BalancerOptions) *Balancer {
	if opts.Rate == 0 {
		opts.Rate = DefaultShedRate
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Balancer{opts: opts}
}

// Run sheds until ctx ends.
func (b *Balancer) Run(ctx context.Context) {
	t := time.NewTicker(balanceTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.step(now)
		}
	}
}

// step sheds what the rate allows of the excess now.
func (b *Balancer) step(now time.Time) {
	elapsed := balanceTick
	if !b.last.IsZero() {
		elapsed = now.Sub(b.last)
	}
	b.last = now
	v := b.opts.View()
	mine := b.opts.Clients()
	excess := Excess(mine, v, b.opts.Tolerance)
	if excess == 0 {
		// Nothing owed: the rate does not accumulate while balanced.
		b.carry = 0
		return
	}
	n, carry := Budget(b.opts.Rate, elapsed, b.carry)
	b.carry = carry
	ids := ToShed(b.opts.Streams(), min(n, excess), now, b.opts.MinAge)
	if len(ids) == 0 {
		return
	}
	shed := b.opts.Shed(ids)
	b.opts.Log.Debug("replicas: shedding clients above the fair share", "clients", mine, "fairShare", v.FairShare(),
		"liveReplicas", len(v.Live), "excess", excess, "shed", shed)
}
