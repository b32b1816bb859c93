package xds

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RefusedRateLimited: a new stream came while the replica was taking
// Options.MaxNewStreamsPerSecond already, and no turn came within
// newStreamWait.
const RefusedRateLimited = "rate_limited"

// DefaultMaxNewStreamsPerSecond is the rate of new streams meshpilot
// serve takes by default (--max-new-streams-per-second). istiod limits
// new xDS streams too (PILOT_MAX_REQUESTS_PER_SECOND: 25 a second on two
// cores, 100 at most), because each of its new proxies costs a full push.
// A new client costs meshpilot far less: 10 000 clients of the default
// workload converged with 3.6 to 4.0 CPU seconds, under 0.4 ms each. At
// 1000 a second, a herd of reconnecting clients (a replica's clients
// after it went away) takes about 0.4 of a core, and the pushes to the
// clients already served and the probes keep the rest; the 5000 clients
// the Deployment lets a replica serve (--max-clients) move to the others
// in about five seconds, where istiod's rate would take minutes.
const DefaultMaxNewStreamsPerSecond = 1000

// newStreamWait is how long a new stream may wait for its turn, as in
// istiod: long enough to spread a burst over a second, short enough that
// a refused client soon tries again, through the Service, perhaps on
// another replica.
const newStreamWait = time.Second

// streamRate paces new streams: at most perSecond, evenly (a burst of
// one, as istiod's), each waiting at most newStreamWait for its turn.
type streamRate struct {
	limiter   *rate.Limiter
	perSecond float64
	log       *slog.Logger
	every     time.Duration
	refusals  intervalLog
}

// newStreamRate returns the pacing of perSecond new streams, nil for no
// limit (zero, negative or infinite).
func newStreamRate(perSecond float64, log *slog.Logger) *streamRate {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return nil
	}
	return &streamRate{limiter: rate.NewLimiter(rate.Limit(perSecond), 1), perSecond: perSecond,
		log: log, every: refusalLogEvery}
}

// admitRate waits for a new stream's turn. A stream whose turn does not
// come within newStreamWait is refused with ResourceExhausted, as istiod
// refuses it and as --max-clients does: this replica is busy, and the
// client retries after its backoff, through the Service; Unavailable
// stays what a replica that is not ready (or draining) says. The refusal
// is counted as RefusedRateLimited and logged at most once per interval.
// A client that goes while it waits is not counted.
func (s *Server) admitRate(ctx context.Context) error {
	r := s.newStreams
	if r == nil {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, newStreamWait)
	defer cancel()
	if r.limiter.Wait(wait) == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	s.refused.rateLimited.Add(1)
	r.logRefusal()
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(
		"meshpilot: this replica takes at most %v new xDS streams a second (--max-new-streams-per-second); retry later or connect to another replica", r.perSecond))
}

// logRefusal logs a refusal unless a line went out within the interval;
// the next line carries the count since.
func (r *streamRate) logRefusal() {
	if ok, n := r.refusals.event(time.Now(), r.every); ok {
		r.log.Warn("xds: refusing new streams beyond --max-new-streams-per-second", "max_new_streams_per_second", r.perSecond,
			"refused", n, "interval", r.every)
	}
}
