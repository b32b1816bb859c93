package replicas

import (
	"context"
	"log/slog"
	"slices"
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
	// DefaultSettle is SettleFor(DefaultPeriod).
	DefaultSettle = 2 * DefaultPeriod
)

// SettleFor is the longest a shed client counts as its old replica's
// when Leases are renewed every period: long enough to cover a reconnect
// and a peer's renewal.
func SettleFor(period time.Duration) time.Duration { return 2 * period }

// BalancerOptions configure a Balancer.
type BalancerOptions struct {
	// View is the replicas' counts (Publisher.View), and Self this
	// replica's name in it.
	View func() View
	Self string
	// Clients is this replica's client count now.
	Clients func() int
	// Conns lists the client connections that may be shed, and Shed
	// closes some so that their clients reconnect through the Service;
	// it returns how many clients (streams) were on them.
	Conns func() []Conn
	Shed  func(ids []int64) int
	// Tolerance is how far above the fair share a replica may hold
	// clients (0.2: 20 %; 0: none, DefaultTolerance is the usual one).
	Tolerance float64
	// Rate is the most streams shed per second; DefaultShedRate when zero.
	Rate float64
	// MinAge is the least time a connection's newest stream has been
	// open before the connection may be shed; DefaultMinAge when zero.
	MinAge time.Duration
	// Settle is the longest a shed client still counts as this
	// replica's (see WithOwn, Settled): long enough for it to reconnect
	// and for a peer's Lease to count it; DefaultSettle when zero.
	Settle time.Duration
	Log    *slog.Logger
}

// Balancer sheds the clients a replica holds beyond its fair share plus
// the tolerance (Excess) or, while a peer holds less than the fair share
// minus the tolerance, those beyond the fair share (Lend), a few a
// second, so that they reconnect through the Service to replicas that
// hold fewer.
//
// Run's goroutine alone uses a Balancer's fields.
type Balancer struct {
	opts  BalancerOptions
	carry float64 // the fraction of a stream the rate allowed, not yet shed
	last  time.Time
	shed  []shedAt // recent sheds, the oldest first, within Settle
	// over is whether the last step found an excess: its start and end
	// are logged, each shed only at debug level.
	over bool
}

type shedAt struct {
	at time.Time
	n  int
}

// NewBalancer fills in the defaults.
func NewBalancer(opts BalancerOptions) *Balancer {
	if opts.Rate == 0 {
		opts.Rate = DefaultShedRate
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.Settle == 0 {
		opts.Settle = DefaultSettle
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
	mine := b.opts.Clients()
	raw := b.opts.View()
	inFlight := b.inFlight(now, raw)
	v, ok := WithOwn(raw, b.opts.Self, mine, inFlight)
	excess := 0
	if ok {
		excess = max(Excess(mine, v, b.opts.Tolerance), Lend(b.opts.Self, mine, v, b.opts.Tolerance))
	}
	if excess == 0 {
		// Nothing owed: the rate does not accumulate while balanced.
		b.carry = 0
		if b.over {
			b.over = false
			b.opts.Log.Info("replicas: within the fair share again", "clients", mine, "fairShare", v.FairShare(),
				"liveReplicas", len(v.Live), "shedRecently", inFlight)
		}
		return
	}
	if !b.over {
		b.over = true
		b.opts.Log.Info("replicas: holding more than the fair share; shedding the excess so that clients reconnect to other replicas",
			"clients", mine, "fairShare", v.FairShare(), "liveReplicas", len(v.Live), "excess", excess,
			"tolerance", b.opts.Tolerance, "rate", b.opts.Rate)
	}
	n, carry := Budget(b.opts.Rate, elapsed, b.carry)
	b.carry = carry
	ids := ToShed(b.opts.Conns(), min(n, excess), now, b.opts.MinAge)
	if len(ids) == 0 {
		return
	}
	shed := b.opts.Shed(ids)
	b.shed = append(b.shed, shedAt{at: now, n: shed})
	b.opts.Log.Debug("replicas: shedding clients above the fair share", "clients", mine, "fairShare", v.FairShare(),
		"liveReplicas", len(v.Live), "excess", excess, "shed", shed)
}

// inFlight is how many of the clients this replica shed no peer's Lease
// may count yet (Settled), and forgets the others.
func (b *Balancer) inFlight(now time.Time, v View) int {
	b.shed = slices.DeleteFunc(b.shed, func(s shedAt) bool { return Settled(s.at, now, v, b.opts.Self, b.opts.Settle) })
	n := 0
	for _, s := range b.shed {
		n += s.n
	}
	return n
}
