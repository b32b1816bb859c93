package debug

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The debug pages show what exportTo and the xDS port's identity checks
// hide from a client (every service and endpoint, any node's config
// dump), pprof can hold a connection for minutes, and each
// /debug/consistencyz lists the whole cluster. So, as istiod does for a
// caller it has not authenticated (allowAuthenticatedOrLocalhost), they
// answer only callers on loopback unless the operator opts in: kubectl
// port-forward reaches them as loopback, and the API server has
// authenticated and authorized that (pods/portforward). meshpilot offers
// no authentication of its own on this port: a token would travel in
// clear over plain HTTP, and mTLS would need a serving certificate the
// port does not have.

// localOnly answers 403 to a caller whose address is not loopback.
func localOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			http.Error(w, "the debug pages answer only on loopback: reach them with kubectl port-forward, or run meshpilot with --debug-allow-remote", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// CheckAddr refuses a debug listen address that is not loopback (an empty
// host listens on every interface) unless allowRemote: the pages would
// answer nobody else, and an address that says otherwise is a mistake to
// report at start rather than a port that refuses every request.
func CheckAddr(addr string, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("--debug-addr %q is not a loopback address: the debug pages show every service and any client's config, unauthenticated; listen on 127.0.0.1 and use kubectl port-forward, or add --debug-allow-remote to serve them to the network", addr)
}

// DefaultConsistencyInterval is the least time between two audits
// /debug/consistencyz starts: each lists every watched kind of the
// cluster.
const DefaultConsistencyInterval = 10 * time.Second

// auditLimit lets one audit start per interval, and none while one runs.
type auditLimit struct {
	interval time.Duration
	mu       sync.Mutex // guards running and last
	running  bool
	started  time.Time // when the running audit started
	last     time.Time // when the last audit that listed started
}

// start reports whether an audit may start now, and else how long to
// wait; done must follow a start that returned true.
func (l *auditLimit) start(now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running {
		return false, l.interval
	}
	if !l.last.IsZero() {
		if wait := l.last.Add(l.interval).Sub(now); wait > 0 {
			return false, wait
		}
	}
	l.running, l.started = true, now
	return true, 0
}

// done ends the audit start allowed; listed says whether it listed the
// cluster (one refused before the registry synced did not, and does not
// hold the next back).
func (l *auditLimit) done(listed bool) {
	l.mu.Lock()
	l.running = false
	if listed {
		l.last = l.started
	}
	l.mu.Unlock()
}

// refuse answers 429 with when to come back.
func (l *auditLimit) refuse(w http.ResponseWriter, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, fmt.Sprintf("an audit lists the whole cluster: one runs at a time and at most one starts every %s; retry in %ds", l.interval, secs), http.StatusTooManyRequests)
}
