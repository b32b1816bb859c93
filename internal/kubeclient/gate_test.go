package kubeclient

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

func TestProbeDelays(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		rand float64
		want []time.Duration
	}{
		{"middle draw: doubling from Min, capped at Max", 0.5, []time.Duration{250 * ms, 500 * ms, 1000 * ms, 1000 * ms, 1000 * ms}},
		{"lowest draw: 20% shorter", 0, []time.Duration{200 * ms, 400 * ms, 800 * ms, 800 * ms}},
		{"highest draw: 20% longer", 1, []time.Duration{300 * ms, 600 * ms, 1200 * ms, 1200 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := probeDelays{Min: 250 * ms, Max: time.Second, Jitter: 0.2, rand: func() float64 { return tt.rand }}
			for n, want := range tt.want {
				if got := d.after(n); got != want {
					t.Errorf("after(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}

// TestProbeDelaysBoundedAndJittered draws real random delays: each lies
// within ±20% of its base, and they differ from one another.
func TestProbeDelaysBoundedAndJittered(t *testing.T) {
	d := probeDelays{Min: 250 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for n := range 200 {
		base := min(250*time.Millisecond<<min(n, 3), time.Second)
		got := d.after(n)
		if got < base*8/10 || got > base*12/10 {
			t.Fatalf("after(%d) = %v, outside ±20%% of %v", n, got, base)
		}
		seen[got] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d different delays in 200: not jittered", len(seen))
	}
}

func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", refused, true},
		{"dial refused inside url.Error", &url.Error{Op: "Get", URL: "https://x", Err: refused}, true},
		{"no route to host on dial", &net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH}, true},
		{"reset while reading", &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF wrapped", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"HTTP/2 connection lost", errors.New("http2: client connection lost"), true},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1"), true},
		{"TLS handshake timeout", timeoutError{}, true},
		{"unknown certificate authority", x509.UnknownAuthorityError{}, false},
		{"TLS alert from the server", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unreachable(tt.err); got != tt.want {
				t.Errorf("unreachable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: TLS handshake timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// fakeBase answers requests with the errors of its script in turn, then
// with 200.
type fakeBase struct {
	mu     sync.Mutex // guards script and sent
	script []error
	sent   []string // method of each request it was given
}

func (f *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, req.Method)
	if len(f.script) > 0 {
		err := f.script[0]
		f.script = f.script[1:]
		if err != nil {
			return nil, err
		}
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func (f *fakeBase) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// fakeProbe fails until ready is set.
type fakeProbe struct {
	ready atomic.Bool
	err   atomic.Value // error answered while not ready
	calls atomic.Int64
	// inflight and most count probes running at once.
	inflight, most atomic.Int64
}

func (p *fakeProbe) probe(ctx context.Context) error {
	p.calls.Add(1)
	n := p.inflight.Add(1)
	defer p.inflight.Add(-1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	time.Sleep(time.Millisecond) // a probe takes a while: overlapping probers would show
	if p.ready.Load() {
		return nil
	}
	if err, ok := p.err.Load().(error); ok {
		return err
	}
	return notReady{status: "500 Internal Server Error"}
}

func testGate(t *testing.T, base http.RoundTripper, p *fakeProbe) (*gatedTransport, *testutil.Lines) {
	t.Helper()
	logs := testutil.NewLines()
	g := &gate{
		host:         "https://apiserver.test",
		probe:        p.probe,
		delays:       probeDelays{Min: time.Millisecond, Max: 5 * time.Millisecond, Jitter: 0.2},
		probeTimeout: time.Second,
		log:          slog.New(slog.NewTextHandler(logs, nil)),
	}
	t.Cleanup(g.probers.Wait)
	return &gatedTransport{gate: g, base: base}, logs
}

func request(t *testing.T, ctx context.Context, method string) *http.Request {
	t.Helper()
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://apiserver.test/api/v1/pods", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}

func TestGateOpenPassesThrough(t *testing.T) {
	base := &fakeBase{}
	rt, logs := testGate(t, base, &fakeProbe{})
	for range 3 {
		resp, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
	}
	if n := base.count(); n != 3 {
		t.Fatalf("base saw %d requests, want 3", n)
	}
	// client-go finds the transport below through the wrapper.
	if w, ok := any(rt).(utilnet.RoundTripperWrapper); !ok || w.WrappedRoundTripper() != base {
		t.Fatal("the gate hides its base transport from client-go")
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q with the API server up", logs.String())
	}
}

// TestGateOtherErrorsPassThrough: an API server that answers, even with a
// TLS failure, is not an outage: the error goes back to the caller and the
// gate stays open.
func TestGateOtherErrorsPassThrough(t *testing.T) {
	tlsErr := &url.Error{Op: "Get", URL: "https://apiserver.test", Err: x509.UnknownAuthorityError{}}
	base := &fakeBase{script: []error{tlsErr}}
	rt, logs := testGate(t, base, &fakeProbe{})
	if _, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet)); !errors.Is(err, tlsErr) {
		t.Fatalf("RoundTrip error = %v, want the TLS error", err)
	}
	if _, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet)); err != nil {
		t.Fatalf("second RoundTrip: %v", err)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q", logs.String())
	}
}

// TestGateGETWaitsAndIsResent: a GET that finds the API server down waits
// in the closed gate, and is sent again once the probe finds the server
// ready: its caller sees no failure. The gate logs once when it closes and
// once when it opens, however many probes fail in between.
func TestGateGETWaitsAndIsResent(t *testing.T) {
	base := &fakeBase{script: []error{errRefused}}
	p := &fakeProbe{}
	rt, logs := testGate(t, base, p)
	done := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet))
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		done <- err
	}()
	awaitCount(t, "failing probes", func() int64 { return p.calls.Load() }, 3)
	select {
	case err := <-done:
		t.Fatalf("the GET returned (%v) while the API server was down", err)
	default:
	}
	p.ready.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("GET after the outage: %v", err)
	}
	if n := base.count(); n != 2 {
		t.Fatalf("base saw %d requests, want 2 (the refused one, then the resent one)", n)
	}
	got := logs.String()
	if strings.Count(got, "unreachable") != 1 || strings.Count(got, "back after") != 1 || logs.Len() != 2 {
		t.Fatalf("log = %q, want one line when the gate closes and one when it opens", got)
	}
}

// TestGateWriteFailsThenLaterRequestsWait: a write is not sent twice (it
// may have reached the server); its caller gets the error, and the
// requests after it wait for the API server.
func TestGateWriteFailsThenLaterRequestsWait(t *testing.T) {
	base := &fakeBase{script: []error{errRefused}}
	p := &fakeProbe{}
	rt, _ := testGate(t, base, p)
	if _, err := rt.RoundTrip(request(t, t.Context(), http.MethodPut)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("PUT error = %v, want connection refused", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := rt.RoundTrip(request(t, t.Context(), http.MethodPut))
		done <- err
	}()
	awaitCount(t, "failing probes", func() int64 { return p.calls.Load() }, 2)
	if n := base.count(); n != 1 {
		t.Fatalf("base saw %d requests while the gate was closed, want 1", n)
	}
	p.ready.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("PUT after the outage: %v", err)
	}
}

// TestGateWaitEndsWithContext: a request whose context ends while it waits
// fails then, with an error that says since when the server is down and
// wraps the context's; with nobody waiting any more the prober stops.
func TestGateWaitEndsWithContext(t *testing.T) {
	rt, p := closedGate(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := rt.RoundTrip(request(t, ctx, http.MethodGet))
		done <- err
	}()
	awaitCount(t, "failing probes", func() int64 { return p.calls.Load() }, 2)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "unreachable since") {
		t.Fatalf("error = %v, want one that wraps context.Canceled and says since when", err)
	}
	rt.gate.probers.Wait() // returns only once the prober has stopped
	calls := p.calls.Load()
	if rt.gate.waiters != 0 || rt.gate.stopProber != nil {
		t.Fatalf("waiters %d, prober running %v after the last waiter left", rt.gate.waiters, rt.gate.stopProber != nil)
	}
	// The gate is still closed: the next request starts a prober again.
	go func() {
		_, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet))
		done <- err
	}()
	awaitCount(t, "probes of a new prober", func() int64 { return p.calls.Load() }, calls+1)
	p.ready.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("GET after the outage: %v", err)
	}
}

// TestGateDeadline: a request with a deadline (a Lease renewal, say) fails
// at its deadline rather than hang.
func TestGateDeadline(t *testing.T) {
	base := &fakeBase{script: []error{errRefused}}
	rt, _ := testGate(t, base, &fakeProbe{})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := rt.RoundTrip(request(t, ctx, http.MethodGet))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline's", err)
	}
}

// TestGateNoWait: a request made with NoWait, even a GET, fails at once
// while the API server is unreachable, saying since when, and is not sent;
// once the gate opens it goes through.
func TestGateNoWait(t *testing.T) {
	rt, p := closedGate(t)
	base := rt.base.(*fakeBase)
	_, err := NoWaitFunc(func(ctx context.Context) (*http.Response, error) {
		return rt.RoundTrip(request(t, ctx, http.MethodGet))
	})(t.Context())
	if err == nil || !strings.Contains(err.Error(), "unreachable since") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("NoWait GET with the gate closed: error %v, want one saying since when and why", err)
	}
	if n := base.count(); n != 1 {
		t.Fatalf("base saw %d requests, want only the POST that closed the gate", n)
	}
	// Nobody waits: no prober runs.
	if rt.gate.stopProber != nil {
		t.Fatal("a prober runs for a request that did not wait")
	}

	p.ready.Store(true)
	rt.gate.open()
	if _, err := rt.RoundTrip(request(t, NoWait(t.Context()), http.MethodGet)); err != nil {
		t.Fatalf("NoWait GET with the gate open: %v", err)
	}

	// A NoWait GET that finds the API server down is not sent again.
	base.mu.Lock()
	base.script = []error{errRefused}
	base.mu.Unlock()
	if _, err := rt.RoundTrip(request(t, NoWait(t.Context()), http.MethodGet)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("NoWait GET to a down API server: error %v, want connection refused", err)
	}
}

// TestGateProbeRefusedByTLSOpens: a probe that fails other than by
// unreachability or unreadiness opens the gate, so that requests fail
// with the real error rather than wait for ever.
func TestGateProbeRefusedByTLSOpens(t *testing.T) {
	tlsErr := &url.Error{Op: "Get", URL: "https://apiserver.test", Err: x509.UnknownAuthorityError{}}
	base := &fakeBase{script: []error{errRefused, tlsErr}}
	p := &fakeProbe{}
	p.err.Store(error(tlsErr))
	rt, _ := testGate(t, base, p)
	if _, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet)); !errors.Is(err, tlsErr) {
		t.Fatalf("error = %v, want the TLS error once the probe met it", err)
	}
}

// TestGateManyWaitersOneProber: however many requests wait, one prober
// probes, and one answer lets them all go.
func TestGateManyWaitersOneProber(t *testing.T) {
	rt, p := closedGate(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := rt.RoundTrip(request(t, t.Context(), http.MethodGet))
			errs <- err
		})
	}
	awaitCount(t, "waiters", func() int64 {
		rt.gate.mu.Lock()
		defer rt.gate.mu.Unlock()
		return int64(rt.gate.waiters)
	}, n)
	before := p.calls.Load()
	awaitCount(t, "probes", func() int64 { return p.calls.Load() }, before+3)
	p.ready.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if m := p.most.Load(); m != 1 {
		t.Fatalf("%d probes ran at once, want one prober", m)
	}
}

// closedGate returns a gate closed by a POST that found the API server
// down (a POST is not resent: it returns at once), and its probe.
func closedGate(t *testing.T) (*gatedTransport, *fakeProbe) {
	t.Helper()
	p := &fakeProbe{}
	rt, _ := testGate(t, &fakeBase{script: []error{errRefused}}, p)
	if _, err := rt.RoundTrip(request(t, t.Context(), http.MethodPost)); err == nil {
		t.Fatal("POST to a down API server succeeded")
	}
	return rt, p
}

// awaitCount polls count until it reaches want.
func awaitCount(t *testing.T, what string, count func() int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want at least %d", what, count(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
