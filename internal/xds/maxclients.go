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

	mu       sync.Mutex // guards lastLog and unlogged
	lastLog  time.Time
	unlogged uint64 // max_clients refusals since the last line
}

func (r *refusals) counts() RefusedStreams {
	return RefusedStreams{NotReady: r.notReady.Load(), MaxClients: r.maxClients.Load(), RateLimited: r.rateLimited.Load()}
}

// overCap counts one stream refused by the cap and logs, unless a line
// went out within the interval; the next line carries the count since.
func (r *refusals) overCap(limit int) error {
	r.maxClients.Add(1)
	r.mu.Lock()
	r.unlogged++
	now := time.Now()
	n := r.unlogged
	logNow := r.lastLog.IsZero() || now.Sub(r.lastLog) >= r.every
	if logNow {
		r.lastLog, r.unlogged = now, 0
	}
	r.mu.Unlock()
	if logNow {
		r.log.Warn("xds: refusing new streams beyond --max-clients", "max_clients", limit, "refused", n,
			"interval", r.every)
	}
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(
		"meshpilot: this replica already serves its maximum of %d xDS streams (--max-clients); connect to another replica", limit))
}
