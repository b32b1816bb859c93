package debug

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/audit"
	"github.com/meshpilot/meshpilot/internal/model"
)

func TestFromLoopback(t *testing.T) {
	for peer, want := range map[string]bool{
		"127.0.0.1:5":          true,
		"127.0.0.9:5":          true,
		"[::1]:5":              true,
		"[::ffff:127.0.0.1]:5": true,
		"192.0.2.1:5":          false,
		"[2001:db8::1]:5":      false,
		"[::ffff:192.0.2.1]:5": false,
		"":                     false,
		"garbage":              false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/debug/syncz", nil)
		r.RemoteAddr = peer
		if got := fromLoopback(r); got != want {
			t.Errorf("%q: loopback %v, want %v", peer, got, want)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		allow bool
		ok    bool
	}{
		{"127.0.0.1:9876", false, true},
		{"[::1]:9876", false, true},
		{"localhost:9876", false, true},
		{":9876", false, false},
		{"0.0.0.0:9876", false, false},
		{"10.0.0.1:9876", false, false},
		{"meshpilot.example:9876", false, false},
		{"no-port", false, false},
		{":9876", true, true},
	} {
		if err := CheckAddr(tc.addr, tc.allow); (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %v) = %v", tc.addr, tc.allow, err)
		}
	}
}

// TestConsistencyzRateLimited: each audit lists the whole cluster, so a
// loop of requests runs one audit per interval; the others get 429 with
// Retry-After, as do requests while an audit runs. An audit refused
// before the registry synced listed nothing and holds nothing back.
func TestConsistencyzRateLimited(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	var synced atomic.Bool
	run := func(context.Context) (audit.Report, error) {
		if !synced.Load() {
			return audit.Report{}, audit.ErrNotSynced
		}
		if runs.Add(1) == 1 {
			<-release
		}
		return audit.Report{Listed: []audit.Listed{}, Differences: []audit.Difference{}}, nil
	}
	mux := http.NewServeMux()
	const interval = 300 * time.Millisecond
	Register(mux, Options{Discovery: model.NewStore(), XDS: fakeXDS{}, Consistency: run, ConsistencyInterval: interval})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/debug/consistencyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("before sync: %d", code)
	}
	synced.Store(true)
	first := make(chan int, 1)
	go func() { code, _ := get(t, srv.URL+"/debug/consistencyz"); first <- code }()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// A flood while the first audit runs.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/debug/consistencyz")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("request during an audit: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first audit: %d", code)
	}
	code, body := get(t, srv.URL+"/debug/consistencyz")
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "at most one starts every") {
		t.Fatalf("right after an audit: %d %s", code, body)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d audits ran, want 1", n)
	}
	time.Sleep(interval)
	if code, body := get(t, srv.URL+"/debug/consistencyz"); code != http.StatusOK {
		t.Fatalf("after the interval: %d %s", code, body)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d audits ran, want 2", n)
	}
}
