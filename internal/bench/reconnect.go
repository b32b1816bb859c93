package bench

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Reconnecting as grpc-go's xDS client does (internal/xds/clients/
// xdsclient/ads_stream.go): a stream that ends for any reason is opened
// again on the same channel, at once when the stream had received a
// response, else after an exponential backoff (grpc's defaults: 1 s,
// x1.6, jitter 0.2, at most 120 s). The channel keeps its connection
// while it is up, so the new stream goes to the same replica; only a
// closed connection makes the channel dial again, through the Service.
const (
	backoffBase   = time.Second
	backoffFactor = 1.6
	backoffJitter = 0.2
	backoffMax    = 120 * time.Second
)

func reconnectBackoff(failures int, rng *rand.Rand) time.Duration {
	d := float64(backoffBase)
	for range failures - 1 {
		d *= backoffFactor
		if d > float64(backoffMax) {
			d = float64(backoffMax)
			break
		}
	}
	return time.Duration(d * (1 + backoffJitter*(rng.Float64()*2-1)))
}

// streamEnded says whether err is a stream's end that grpc-go's client
// reconnects after (a status from the server or the transport, or the
// server's clean end), rather than the benchmark's own failure (a
// response it could not read).
func streamEnded(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	var st interface{ GRPCStatus() *status.Status }
	return errors.As(err, &st)
}

// endCode names how a stream ended: its status code, or EOF.
func endCode(err error) string {
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	return status.Code(err).String()
}

// reset forgets what the client learnt on its last stream: the next one
// follows LDS -> RDS -> CDS -> EDS from the start, as a new stream asks
// for everything again.
func (c *adsClient) reset() {
	c.subs = [4][]string{}
	c.listenerRoute = map[string]string{}
	c.routeClusters = map[string][]string{}
	c.routeSplit = map[string]string{}
	c.clusterEDS = map[string]string{}
	c.clas = map[string]map[string]struct{}{}
	c.converged, c.received = false, false
}

// runReconnecting follows streams on cc until ctx ends, opening a new one
// whenever one ends, and tells lives of each end. It returns the
// benchmark's own failure, never a stream's end.
func (c *adsClient) runReconnecting(ctx context.Context, cc grpc.ClientConnInterface, lives *clientLives, rng *rand.Rand) error {
	failures := 0
	for {
		err := c.run(ctx, cc)
		if ctx.Err() != nil {
			return nil
		}
		if !streamEnded(err) {
			return err
		}
		lives.ended(c.id, time.Now(), c.converged, endCode(err))
		if c.received {
			failures = 0
		} else {
			failures++
		}
		c.reset()
		if failures == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectBackoff(failures, rng)):
		}
	}
}

// clientLives follows each client across its streams: how often it
// reconnected, how long it went from a stream's end to holding its
// whole configuration again on a new one, and whether it ever needed
// more than one reconnect for that. It is the observer of the clients in
// a replica run; its methods are called from the clients' goroutines.
type clientLives struct {
	mu      sync.Mutex // guards every field below
	lives   []clientLife
	first   int // clients complete on their first stream
	allDone chan struct{}
	codes   map[string]int // how streams ended, by status code
}

type clientLife struct {
	reconnects int
	// since is when the client last lost a stream while complete, zero
	// while it is complete on its stream.
	since      time.Time
	complete   bool // complete on its current stream
	everDone   bool // complete on some stream yet
	longestGap time.Duration
	// violations: streams lost before the client was complete on them
	// again, after it had lost a complete one: a reconnect that did not
	// bring its configuration back.
	violations int
}

func newClientLives(n int) *clientLives {
	return &clientLives{lives: make([]clientLife, n), allDone: make(chan struct{}), codes: map[string]int{}}
}

func (l *clientLives) observe(int, string, time.Time) {}

func (l *clientLives) completeCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *clientLives) converged(id int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.lives[id]
	c.complete = true
	if !c.since.IsZero() {
		c.longestGap = max(c.longestGap, at.Sub(c.since))
		c.since = time.Time{}
	}
	if !c.everDone {
		c.everDone = true
		l.first++
		if l.first == len(l.lives) {
			close(l.allDone)
		}
	}
}

// ended records that client id's stream ended at at, the client complete
// on it or not.
func (l *clientLives) ended(id int, at time.Time, complete bool, code string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.lives[id]
	c.reconnects++
	l.codes[code]++
	switch {
	case complete:
		c.since = at
	case !c.since.IsZero():
		c.violations++
	}
	c.complete = false
}

// ClientLives sums up the clients' reconnects in a replica run.
type ClientLives struct {
	// Reconnects is the sum over clients; Reconnected how many clients
	// reconnected at least once, MostReconnects the most one did.
	Reconnects     int `json:"reconnects"`
	Reconnected    int `json:"clients_reconnected"`
	MostReconnects int `json:"most_reconnects"`
	// EndedBy counts the streams that ended by their status code.
	EndedBy map[string]int `json:"ended_by"`
	// LongestGapMS is, over clients, from losing a stream on which the
	// client was complete to being complete on a new one (p50, p99, max
	// over the clients that reconnected).
	LongestGap Percentiles `json:"longest_without_config"`
	// Violations count streams lost before they brought the client's
	// configuration back: a client needing more than one reconnect.
	Violations int `json:"violations"`
	// IncompleteAtEnd are clients without their whole configuration when
	// the run ended.
	IncompleteAtEnd int `json:"incomplete_at_end"`
	// PerClient lists each client's figures, by client index.
	PerClient []ClientLife `json:"per_client"`
}

// ClientLife is one client's reconnects.
type ClientLife struct {
	Reconnects   int     `json:"reconnects"`
	LongestGapMS float64 `json:"longest_without_config_ms"`
	Violations   int     `json:"violations,omitempty"`
}

// summary sums up at now: a client still without its configuration
// counts its gap so far.
func (l *clientLives) summary(now time.Time) ClientLives {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ClientLives{EndedBy: map[string]int{}, PerClient: make([]ClientLife, len(l.lives))}
	for k, v := range l.codes {
		s.EndedBy[k] = v
	}
	var gaps []time.Duration
	for i, c := range l.lives {
		gap := c.longestGap
		if !c.complete {
			s.IncompleteAtEnd++
			if !c.since.IsZero() {
				gap = max(gap, now.Sub(c.since))
			}
		}
		s.PerClient[i] = ClientLife{Reconnects: c.reconnects, LongestGapMS: ms(gap), Violations: c.violations}
		s.Reconnects += c.reconnects
		s.MostReconnects = max(s.MostReconnects, c.reconnects)
		s.Violations += c.violations
		if c.reconnects > 0 {
			s.Reconnected++
			gaps = append(gaps, gap)
		}
	}
	d := newDist(gaps)
	s.LongestGap = Percentiles{P50MS: d.p(50), P90MS: d.p(90), P99MS: d.p(99), MaxMS: d.p(100)}
	return s
}
