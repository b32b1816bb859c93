package xds

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Why a new stream was refused, as the refused streams metric labels it.
const (
	// RefusedNotReady: the model is not synced yet, or the server is
	// draining (Options.Ready reports false).
	RefusedNotReady = "not_ready"
	// RefusedMaxClients: the replica already serves Options.MaxClients
	// streams.
	RefusedMaxClients = "max_clients"
)

// refusalLogEvery bounds how often refusals are logged: a fleet that
// retries against a full replica refuses many streams a second, and one
// line per interval, with the count, says as much.
const refusalLogEvery = 10 * time.Second

// RefusedStreams counts the streams refused at open, by reason.
type RefusedStreams struct {
	NotReady, MaxClients, RateLimited uint64
}

// refusals counts refused streams and logs them, at most once per
// interval.
type refusals struct {
	log        *slog.Logger
	every      time.Duration
	notReady   atomic.Uint64
	maxClients atomic.Uint64
	// rateLimited: RefusedRateLimited (ratelimit.go).
	rateLimited atomic.Uint64

	// overCapLog says which max_clients refusals to log.
	overCapLog intervalLog
}

// intervalLog decides which of a repeated event's occurrences to log:
// the first, then at most one per interval, each line carrying the count
// since the last. Refusals of new streams come in herds, and one line a
// minute says as much as one per stream.
type intervalLog struct {
	mu       sync.Mutex // guards lastLog and unlogged
	lastLog  time.Time
	unlogged uint64
}

// event records one occurrence and says whether to log it, with how
// many occurred since the last line, this one included.
func (l *intervalLog) event(now time.Time, every time.Duration) (ok bool, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unlogged++
	n = l.unlogged
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < every {
		return false, n
	}
	l.lastLog, l.unlogged = now, 0
	return true, n
}

func (r *refusals) counts() RefusedStreams {
	return RefusedStreams{NotReady: r.notReady.Load(), MaxClients: r.maxClients.Load(), RateLimited: r.rateLimited.Load()}
}

// overCap counts one stream refused by the cap and logs, unless a line
// went out within the interval; the next line carries the count since.
func (r *refusals) overCap(limit int) error {
	r.maxClients.Add(1)
	if ok, n := r.overCapLog.event(time.Now(), r.every); ok {
		r.log.Warn("xds: refusing new streams beyond --max-clients", "max_clients", limit, "refused", n,
			"interval", r.every)
	}
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(
		"meshpilot: this replica already serves its maximum of %d xDS streams (--max-clients); connect to another replica", limit))
}
