package grpctest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
)

// XDSBackend is a real grpc-go xDS server (gRFC A36) serving the health
// service: it serves RPCs only once its xDS server sent it its inbound
// listener, and reports its serving mode as it changes.
type XDSBackend struct {
	Backend

	mu      sync.Mutex // guards the fields below
	mode    connectivity.ServingMode
	err     error         // with the last mode report; nil when SERVING
	reports int           // mode reports so far
	changed chan struct{} // closed and replaced on every report
}

// StartXDSBackend starts an xDS server on ip:port (port 0 picks a free
// one) that reads bootstrap, a bootstrap document of its own (grpc-go
// reads GRPC_XDS_BOOTSTRAP once per process). Its transport is plaintext,
// whatever the listener says about security. The test stops it.
func StartXDSBackend(t testing.TB, ip string, port int, bootstrap []byte) *XDSBackend {
	t.Helper()
	return startXDSBackend(t, ip, port, bootstrap, insecure.NewCredentials())
}

// StartSecureXDSBackend is StartXDSBackend with xDS credentials: the
// server secures connections as its listener's filter chain says
// (DownstreamTlsContext, with the certificate providers of its
// bootstrap), plaintext where it says nothing.
func StartSecureXDSBackend(t testing.TB, ip string, port int, bootstrap []byte) *XDSBackend {
	t.Helper()
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	return startXDSBackend(t, ip, port, bootstrap, creds)
}

func startXDSBackend(t testing.TB, ip string, port int, bootstrap []byte, creds credentials.TransportCredentials) *XDSBackend {
	t.Helper()
	b := &XDSBackend{mode: connectivity.ServingModeNotServing, changed: make(chan struct{})}
	s, err := xds.NewGRPCServer(
		grpc.Creds(creds),
		xds.BootstrapContentsForTesting(bootstrap),
		xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.mode, b.err = args.Mode, args.Err
			b.reports++
			close(b.changed)
			b.changed = make(chan struct{})
		}),
	)
	if err != nil {
		t.Fatalf("xDS server: %v", err)
	}
	healthpb.RegisterHealthServer(s, health.NewServer())
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Fatalf("listen on %s:%d: %v", ip, port, err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	a := lis.Addr().(*net.TCPAddr)
	b.Backend = Backend{IP: ip, Port: uint32(a.Port), Addr: a.String()}
	return b
}

// Mode returns the last serving mode reported and its error.
func (b *XDSBackend) Mode() (connectivity.ServingMode, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mode, b.err
}

// AwaitServing waits until the server reports SERVING.
func (b *XDSBackend) AwaitServing(t testing.TB) {
	t.Helper()
	b.await(t, "SERVING", func(m connectivity.ServingMode, _ error) bool {
		return m == connectivity.ServingModeServing
	})
}

// AwaitNotServing waits until the server reports NOT_SERVING with an
// error, and returns the error: why it does not serve.
func (b *XDSBackend) AwaitNotServing(t testing.TB) error {
	t.Helper()
	var err error
	b.await(t, "NOT_SERVING with an error", func(m connectivity.ServingMode, e error) bool {
		err = e
		return m == connectivity.ServingModeNotServing && e != nil
	})
	return err
}

func (b *XDSBackend) await(t testing.TB, what string, ok func(connectivity.ServingMode, error) bool) {
	t.Helper()
	deadline := time.After(Wait)
	for {
		b.mu.Lock()
		mode, err, reports, changed := b.mode, b.err, b.reports, b.changed
		b.mu.Unlock()
		if reports > 0 && ok(mode, err) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("xDS server on %s never reported %s within %v; last mode %v (%d reports), error %v", b.Addr, what, Wait, mode, reports, err)
		}
	}
}
