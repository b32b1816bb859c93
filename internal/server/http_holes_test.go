package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDebugPagesAnswerOnlyLoopback: without --debug-addr the debug pages
// share the HTTP port, which listens on every interface; a caller that is
// not on loopback (another pod) gets 403 from every page, pprof included,
// while the port's other paths and a caller on loopback (kubectl
// port-forward) are served. --debug-allow-remote serves everyone.
func TestDebugPagesAnswerOnlyLoopback(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow remote %v", allow), func(t *testing.T) {
			reg := newRegistry()
			reg.synced.Store(true)
			s := start(t, Options{Sources: reg.sources(), DebugAllowRemote: allow})
			for _, path := range []string{"/debug/endpointz", "/debug/registryz", "/debug/syncz", "/debug/configz", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/config_dump?node=x"} {
				for _, peer := range []string{"192.0.2.7:40000", "[2001:db8::7]:40000", "127.0.0.1:40000", "[::1]:40000"} {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.RemoteAddr = peer
					rec := httptest.NewRecorder()
					s.http.Handler.ServeHTTP(rec, req)
					local := strings.HasPrefix(peer, "127.") || strings.HasPrefix(peer, "[::1]")
					refused := rec.Code == http.StatusForbidden
					if refused != (!local && !allow) {
						t.Errorf("%s from %s: %d %s", path, peer, rec.Code, rec.Body)
					}
					if refused && !strings.Contains(rec.Body.String(), "port-forward") {
						t.Errorf("%s from %s: refusal says %q, not how to reach the page", path, peer, rec.Body)
					}
				}
			}
			req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
			req.RemoteAddr = "192.0.2.7:40000"
			rec := httptest.NewRecorder()
			s.http.Handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Errorf("/readyz from another host: %d", rec.Code)
			}
		})
	}
}

// TestDebugAddrOffLoopbackRefused: a --debug-addr that is not loopback is
// refused at start, saying what to do, unless --debug-allow-remote.
func TestDebugAddrOffLoopbackRefused(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		allow bool
		err   string
	}{
		{addr: ":0", err: "not a loopback address"},
		{addr: "0.0.0.0:0", err: "not a loopback address"},
		{addr: "[::]:0", err: "not a loopback address"},
		{addr: ":0", allow: true},
		{addr: "127.0.0.1:0"},
		{addr: "localhost:0"},
	} {
		t.Run(fmt.Sprintf("%s allow=%v", tc.addr, tc.allow), func(t *testing.T) {
			s, err := New(Options{Sources: newRegistry().sources(), XDSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DebugAddr: tc.addr, DebugAllowRemote: tc.allow})
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				s.xdsLis.Close()
				s.httpLis.Close()
				s.debugLis.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--debug-allow-remote") {
				t.Fatalf("error %v, want one with %q naming --debug-allow-remote", err, tc.err)
			}
		})
	}
}

// TestHTTPServerBounds: the HTTP port holds at most HTTPMaxConnections
// connections (a further one is not served until one closes), and its
// server has read, write and idle timeouts, the write timeout longer than
// pprof's default profile.
func TestHTTPServerBounds(t *testing.T) {
	reg := newRegistry()
	reg.synced.Store(true)
	s := start(t, Options{Sources: reg.sources(), HTTPMaxConnections: 2})
	for _, srv := range []*http.Server{s.http} {
		if srv.ReadTimeout <= 0 || srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 || srv.WriteTimeout <= 30*time.Second {
			t.Fatalf("timeouts: read %v, header %v, write %v, idle %v", srv.ReadTimeout, srv.ReadHeaderTimeout, srv.WriteTimeout, srv.IdleTimeout)
		}
	}
	// Two connections that hold their slot (keep-alive after a request).
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if code := healthz(t, c); code != http.StatusOK {
			t.Fatalf("healthz: %d", code)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", s.HTTPAddr()) // the kernel accepts it; the server does not
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	answered := make(chan int, 1)
	go func() { answered <- healthz(t, third) }()
	select {
	case code := <-answered:
		t.Fatalf("a third connection was served (%d) while two were held", code)
	case <-time.After(300 * time.Millisecond):
	}
	held[0].Close()
	select {
	case code := <-answered:
		if code != http.StatusOK {
			t.Fatalf("third connection: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not served once a slot was free")
	}
}

// healthz sends GET /healthz on c and returns the status code (0 when c
// fails).
func healthz(t *testing.T, c net.Conn) int {
	if _, err := fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
