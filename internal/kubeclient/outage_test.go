package kubeclient

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// apiServer is a stand-in API server on a fixed loopback address that
// can be stopped and started again there. /readyz answers 500 to its
// first notReady probes after a start, as a starting API server does.
type apiServer struct {
	t         *testing.T
	addr      string
	srv       *httptest.Server
	notReady  atomic.Int64 // /readyz answers 500 while this is above 0
	readyz    atomic.Int64 // /readyz requests served
	anonymous atomic.Int64 // requests without the test's bearer token
}

const testToken = "test-token"

func (a *apiServer) start() {
	a.t.Helper()
	lis, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.t.Fatal(err)
	}
	a.addr = lis.Addr().String()
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			a.anonymous.Add(1)
		}
		if r.URL.Path == "/readyz" {
			a.readyz.Add(1)
			if a.notReady.Add(-1) >= 0 {
				http.Error(w, "[-]poststarthook/not-yet failed", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "ok")
			return
		}
		_, _ = io.WriteString(w, "served "+r.URL.Path)
	}))
	a.srv.Listener = lis
	a.srv.Start()
}

func (a *apiServer) stop() { a.srv.CloseClientConnections(); a.srv.Close() }

// TestWithOutageGateAgainstAServer runs the gate as serve installs it,
// against a server that goes away and comes back on the same address:
// a GET made during the outage waits, the probes go to /readyz with the
// configuration's credentials, an unready answer keeps the gate closed,
// and the GET is answered by the returned server.
func TestWithOutageGateAgainstAServer(t *testing.T) {
	a := &apiServer{t: t, addr: "127.0.0.1:0"}
	a.start()
	t.Cleanup(a.stop)
	logs := testutil.NewLines()
	cfg := WithOutageGate(&rest.Config{Host: "http://" + a.addr, BearerToken: testToken}, OutageOptions{
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		ProbeMin: 5 * time.Millisecond, ProbeMax: 20 * time.Millisecond,
	})
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		resp, err := client.Get("http://" + a.addr + "/api/v1/pods")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(); err != nil || got != "served /api/v1/pods" {
		t.Fatalf("GET with the server up = %q, %v", got, err)
	}

	a.stop()
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		body, err := get()
		done <- result{body, err}
	}()
	logs.Await(t, "the gate closing", 0, func(l string) bool {
		return strings.Contains(l, "API server unreachable") && strings.Contains(l, "connection refused")
	})
	a.notReady.Store(3)
	a.start()
	if r := <-done; r.err != nil || r.body != "served /api/v1/pods" {
		t.Fatalf("GET made during the outage = %q, %v; want it answered once the server is back", r.body, r.err)
	}
	if n := a.readyz.Load(); n < 4 {
		t.Fatalf("/readyz asked %d times, want 3 unready answers and a ready one first", n)
	}
	logs.Await(t, "the gate opening", 0, func(l string) bool { return strings.Contains(l, "API server back after") })
	if n := logs.Len(); n != 2 {
		t.Fatalf("log = %q, want two lines", logs.String())
	}
	// A reflector's watch resumed during an outage gets what client-go
	// takes for an expired resourceVersion.
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.stop()
	_, err = clientset.CoreV1().Pods("ns").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "42"})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch from resourceVersion 42 during the outage: %v, want Expired", err)
	}
	if n := a.anonymous.Load(); n != 0 {
		t.Fatalf("%d requests came without the configuration's credentials", n)
	}
}
