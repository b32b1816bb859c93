package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// gate holds back the requests to one API server while it is unreachable.
//
// client-go's reflectors back off after each failed list or watch (800 ms,
// doubling, each delay up to twice as long, capped at 30 s, and reset only
// once two minutes have passed since the last reset), and a
// SharedIndexInformer offers no way to set that backoff. Through an outage
// of a few seconds it grows, and after the API server's return a reflector
// may sleep for many seconds more before it lists again (20 s and more
// after a 15 s outage, measured). The gate keeps the outage from the
// reflectors: once a request finds the API server unreachable, later
// requests wait in the gate instead of failing, and a reflector's request
// (a GET) that met the outage is sent again, while one prober asks the
// API server's /readyz at a bounded, jittered interval; when it answers,
// every waiting request goes ahead at once. A watch that would resume
// from a resourceVersion is answered 410 Expired at once instead (see
// expired): a restarted API server would refuse it as too old anyway, and
// the reflector's backoff step before it lists again then elapses during
// the outage rather than after it.
//
// A gate is safe for concurrent use; one serves every client of its API
// server.
type gate struct {
	host   string
	probe  func(context.Context) error // nil: the API server is ready
	delays probeDelays
	// probeTimeout bounds one probe.
	probeTimeout time.Duration
	log          *slog.Logger

	// probers counts running prober goroutines (tests wait on it).
	probers sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	down    bool
	since   time.Time     // when the gate closed
	cause   error         // the failure that closed it, or the last probe's
	opened  chan struct{} // closed when the gate opens again
	waiters int           // requests waiting in the gate
	probes  int           // probes made since the gate closed
	// stopProber ends the running prober; nil when none runs. A prober
	// runs only while requests wait: nothing else needs the API server.
	stopProber context.CancelFunc
}

// wait returns at once while the API server is reachable, and otherwise
// when the prober finds it back, or with an error that wraps ctx's when
// ctx ends first: a request with a deadline fails at its deadline, it
// never hangs past it.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	if !g.down {
		g.mu.Unlock()
		return nil
	}
	if noWait(ctx) {
		since, cause := g.since, g.cause
		g.mu.Unlock()
		return g.unreachableSince(since, cause)
	}
	opened := g.opened
	g.waiters++
	if g.stopProber == nil {
		pctx, stop := context.WithCancel(context.Background())
		g.stopProber = stop
		g.probers.Add(1)
		go g.runProber(pctx)
	}
	g.mu.Unlock()
	select {
	case <-opened:
		g.leave()
		return nil
	case <-ctx.Done():
		since, cause := g.leave()
		return fmt.Errorf("%w: %w", g.unreachableSince(since, cause), ctx.Err())
	}
}

// downSince returns, while the gate is closed, an error that says since
// when and why; nil while it is open.
func (g *gate) downSince() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return nil
	}
	return g.unreachableSince(g.since, g.cause)
}

func (g *gate) unreachableSince(since time.Time, cause error) error {
	return fmt.Errorf("the API server at %s has been unreachable since %s (%v)", g.host, since.Format(time.TimeOnly), cause)
}

// leave ends a wait and returns when the outage began and its cause.
func (g *gate) leave() (since time.Time, cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiters--
	if g.waiters == 0 && g.stopProber != nil {
		g.stopProber()
		g.stopProber = nil
	}
	return g.since, g.cause
}

// fail closes the gate after a request found the API server unreachable.
func (g *gate) fail(err error) {
	g.mu.Lock()
	if g.down {
		g.mu.Unlock()
		return
	}
	g.down, g.since, g.cause, g.probes = true, time.Now(), err, 0
	g.opened = make(chan struct{})
	g.mu.Unlock()
	g.log.Warn("API server unreachable; requests to it wait until it answers", "apiserver", g.host, "err", err)
}

// open lets every waiting request go.
func (g *gate) open() {
	g.mu.Lock()
	if !g.down {
		g.mu.Unlock()
		return
	}
	g.down = false
	opened := g.opened
	if g.stopProber != nil {
		g.stopProber()
		g.stopProber = nil
	}
	after := time.Since(g.since)
	g.mu.Unlock()
	// Said before the waiting requests go, so that the log reads in order.
	g.log.Info(fmt.Sprintf("API server back after %.1fs", after.Seconds()), "apiserver", g.host)
	close(opened)
}

// runProber probes until the API server answers or ctx ends.
func (g *gate) runProber(ctx context.Context) {
	defer g.probers.Done()
	for {
		g.mu.Lock()
		d := g.delays.after(g.probes)
		g.probes++
		g.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, g.probeTimeout)
		err := g.probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !stillDown(err) {
			g.open()
			return
		}
		g.mu.Lock()
		g.cause = err
		g.mu.Unlock()
	}
}

// notReady is a probe's answer from an API server that is up but not
// ready to serve.
type notReady struct{ status string }

func (e notReady) Error() string { return "/readyz answered " + e.status }

// stillDown reports whether a probe's error means waiting on. An error
// that is neither unreachability nor unreadiness (a certificate the
// client no longer trusts, say) opens the gate: the requests then fail
// with it, and client-go logs it, instead of waiting for ever in silence.
func stillDown(err error) bool {
	var nr notReady
	return unreachable(err) || errors.As(err, &nr)
}

// noWaitKey marks a context made by NoWait.
type noWaitKey struct{}

// NoWait returns ctx marked so that requests made with it, through a
// configuration from WithOutageGate, never wait out an outage: while the
// API server is unreachable they fail at once, saying since when. For
// answers a person is waiting for (an audit on demand), where
// "unreachable" now is worth more than an answer later.
func NoWait(ctx context.Context) context.Context { return context.WithValue(ctx, noWaitKey{}, true) }

// NoWaitFunc returns f calling with its context marked by NoWait.
func NoWaitFunc[T any](f func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) { return f(NoWait(ctx)) }
}

func noWait(ctx context.Context) bool { return ctx.Value(noWaitKey{}) != nil }

// gatedTransport sends requests through the gate.
type gatedTransport struct {
	gate *gate
	base http.RoundTripper
}

// RoundTrip waits in the gate, sends req, and closes the gate when the API
// server turns out unreachable. A GET or HEAD (without a body) that failed
// so is sent again once the gate opens: it changes nothing on the server,
// whether or not it reached it. Other requests return their error (their
// callers retry, and their next attempt waits in the gate), as does any
// request made with NoWait. A watch that would resume from a
// resourceVersion is answered 410 Expired at once while the gate is closed
// (see expired).
func (t *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		if why := t.gate.downSince(); why != nil && resumableWatch(req) {
			return expired(req, why), nil
		}
		if err := t.gate.wait(req.Context()); err != nil {
			if req.Body != nil {
				req.Body.Close() // RoundTrip always closes the body
			}
			return nil, err
		}
		resp, err := t.base.RoundTrip(req)
		if err == nil || req.Context().Err() != nil || !unreachable(err) {
			return resp, err
		}
		t.gate.fail(err)
		if resumableWatch(req) {
			return expired(req, t.gate.downSince()), nil
		}
		if !resendable(req) || noWait(req.Context()) {
			return nil, err
		}
	}
}

// WrappedRoundTripper lets client-go reach the transport below (to close
// its idle connections, say).
func (t *gatedTransport) WrappedRoundTripper() http.RoundTripper { return t.base }

func resendable(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody)
}
