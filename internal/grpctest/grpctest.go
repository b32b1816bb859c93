// Package grpctest holds what meshpilot's tests need to drive real gRPC
// traffic: gRPC backends on loopback addresses and grpc-go xDS client
// channels, each with a bootstrap of its own, plus waits on where RPCs go.
package grpctest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
)

// Wait bounds every wait of this package.
var Wait = 30 * time.Second

// Backend is a real gRPC server (the health service) on a loopback address.
type Backend struct {
	IP   string
	Port uint32
	Addr string // IP:Port
}

// StartBackend starts a backend on ip; port 0 picks a free one. The test
// stops it.
func StartBackend(t testing.TB, ip string, port int) Backend {
	t.Helper()
	return serveHealth(t, ip, port, health.NewServer())
}

// StartTLSBackend starts a backend on ip, on a free port, whose
// connections creds secure (a plain gRPC server, not an xDS one). The
// test stops it.
func StartTLSBackend(t testing.TB, ip string, creds credentials.TransportCredentials) Backend {
	t.Helper()
	return serveHealth(t, ip, 0, health.NewServer(), grpc.Creds(creds))
}

// serveHealth serves h as the health service on ip:port until the test
// ends.
func serveHealth(t testing.TB, ip string, port int, h healthpb.HealthServer, opts ...grpc.ServerOption) Backend {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Fatalf("listen on %s:%d: %v", ip, port, err)
	}
	g := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(g, h)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	a := lis.Addr().(*net.TCPAddr)
	return Backend{IP: ip, Port: uint32(a.Port), Addr: a.String()}
}

// StartBackends starts one backend on each ip, all on the same port, so
// that one EndpointSlice port serves them all.
func StartBackends(t testing.TB, ips ...string) []Backend {
	t.Helper()
	port := FreePort(t, ips...)
	out := make([]Backend, 0, len(ips))
	for _, ip := range ips {
		out = append(out, StartBackend(t, ip, port))
	}
	return out
}

// FreePort finds a port that is free right now on every one of ips.
func FreePort(t testing.TB, ips ...string) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		free := true
		for _, ip := range ips[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// ChannelOptions shape an xDS channel.
type ChannelOptions struct {
	// Namespace of the client's node; the node id is Istio's sidecar form.
	Namespace string
	// Generator is the GENERATOR node metadata; "grpc" when empty.
	Generator string
	// MapAddress rewrites the address the channel dials (e.g. a
	// documentation address from an EndpointSlice to a loopback backend).
	MapAddress func(addr string) string
	// IP is the client's address in its node id; 127.0.0.1 when empty.
	IP string
	// NodeName, when set, is the NODE_NAME node metadata; Region and Zone
	// the node's locality (empty when unset, as meshpilot's bootstrap
	// writes it without one).
	NodeName, Region, Zone string
	// ClusterID, when set, is the CLUSTER_ID node metadata: the cluster
	// the client runs in.
	ClusterID string
	// Labels, when set, are the LABELS node metadata: the workload's
	// labels, as Istio's bootstraps write them.
	Labels map[string]string
	// XDSCredentials makes the channel secure its connections as the
	// clusters' TLS contexts say (gRFC A29), with the certificate
	// providers of its bootstrap; plaintext where they say nothing.
	XDSCredentials bool
}

var nodeSeq atomic.Int64

// Channel opens a grpc-go channel to target (an xds:/// URL) with a
// bootstrap of its own that points at the xDS server xdsAddr.
func Channel(t testing.TB, xdsAddr, target string, o ChannelOptions) *grpc.ClientConn {
	t.Helper()
	if o.Generator == "" {
		o.Generator = "grpc"
	}
	ns := o.Namespace
	if ns == "" {
		ns = "default"
	}
	ip := o.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	metadata := map[string]any{"GENERATOR": o.Generator, "NAMESPACE": ns}
	if o.NodeName != "" {
		metadata["NODE_NAME"] = o.NodeName
	}
	if o.ClusterID != "" {
		metadata["CLUSTER_ID"] = o.ClusterID
	}
	if o.Labels != nil {
		metadata["LABELS"] = o.Labels
	}
	node, err := json.Marshal(map[string]any{
		"id":       fmt.Sprintf("sidecar~%s~client-%d.%s~%s.svc.cluster.local", ip, nodeSeq.Add(1), ns, ns),
		"metadata": metadata,
		"locality": map[string]string{"region": o.Region, "zone": o.Zone},
	})
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": %s
}`, xdsAddr, node)
	return ChannelWithBootstrap(t, target, []byte(bootstrap), o)
}

// ChannelWithBootstrap opens a grpc-go channel to target (an xds:/// URL)
// that reads bootstrap, a bootstrap document of its own; of o it reads
// only MapAddress and XDSCredentials.
func ChannelWithBootstrap(t testing.TB, target string, bootstrap []byte, o ChannelOptions) *grpc.ClientConn {
	t.Helper()
	res, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	creds := insecure.NewCredentials()
	if o.XDSCredentials {
		if creds, err = xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()}); err != nil {
			t.Fatal(err)
		}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithResolvers(res)}
	if o.MapAddress != nil {
		opts = append(opts, DialMapped(o.MapAddress))
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// DialMapped makes a channel dial mapAddress(addr) wherever it would dial
// addr.
func DialMapped(mapAddress func(addr string) string) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", mapAddress(addr))
	})
}

// DocToLoopback maps 192.0.2.N (the documentation range, which the API
// server accepts in EndpointSlices) to 127.0.0.N; other addresses are
// returned unchanged. Nothing is ever dialled outside loopback this way.
func DocToLoopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasPrefix(host, "192.0.2.") {
		return addr
	}
	return net.JoinHostPort("127.0.0."+strings.TrimPrefix(host, "192.0.2."), port)
}

// Call makes one RPC and returns the address of the backend that served it.
func Call(ctx context.Context, cc *grpc.ClientConn) (string, error) {
	var p peer.Peer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// AwaitSpread makes rounds of RPCs until one round is served by exactly
// the backends want (each at least once), or fails at the deadline.
func AwaitSpread(t testing.TB, cc *grpc.ClientConn, want ...Backend) {
	t.Helper()
	wantSet := map[string]bool{}
	for _, b := range want {
		wantSet[b.Addr] = true
	}
	deadline := time.Now().Add(Wait)
	var last map[string]int
	var lastErr error
	for time.Now().Before(deadline) {
		got := map[string]int{}
		lastErr = nil
		for range 10 * len(want) {
			addr, err := Call(context.Background(), cc)
			if err != nil {
				lastErr = err
				break
			}
			got[addr]++
		}
		last = got
		if lastErr == nil && sameKeys(got, wantSet) {
			return
		}
		time.Sleep(20 * time.Millisecond) // between polling rounds
	}
	t.Fatalf("RPCs never spread over exactly %v: last round %v, error %v", slices.Sorted(maps.Keys(wantSet)), last, lastErr)
}

// CountRPCs makes n RPCs, a few at a time, and returns how many each
// backend address served. Any failed RPC fails the test.
func CountRPCs(t testing.TB, cc *grpc.ClientConn, n int) map[string]int {
	t.Helper()
	const workers = 4
	var mu sync.Mutex // guards counts and firstErr
	counts := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				addr, err := Call(context.Background(), cc)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				counts[addr]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("RPC failed: %v", firstErr)
	}
	return counts
}

// AwaitUnavailable makes RPCs until one fails with Unavailable.
func AwaitUnavailable(t testing.TB, cc *grpc.ClientConn) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	var err error
	for time.Now().Before(deadline) {
		if _, err = Call(context.Background(), cc); status.Code(err) == codes.Unavailable {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("RPCs never failed with Unavailable; last error %v", err)
}

func sameKeys(got map[string]int, want map[string]bool) bool {
	if len(got) != len(want) {
		return false
	}
	for k := range got {
		if !want[k] {
			return false
		}
	}
	return true
}
