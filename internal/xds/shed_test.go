package xds

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// perTypeStream is one of Envoy's per-type (non-ADS) streams.
type perTypeStream interface {
	Send(*discovery.DiscoveryRequest) error
	Recv() (*discovery.DiscoveryResponse, error)
}

// openPerType opens Envoy's CDS and EDS streams on one connection, as
// Envoy does without ADS, and reads each one's first response.
func openPerType(t *testing.T, cc *grpc.ClientConn, id string) []perTypeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cds, err := clusterservice.NewClusterDiscoveryServiceClient(cc).StreamClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eds, err := endpointservice.NewEndpointDiscoveryServiceClient(cc).StreamEndpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := []perTypeStream{cds, eds}
	for _, st := range out {
		if err := st.Send(&discovery.DiscoveryRequest{Node: envoyNode(id), ResourceNames: []string{reviews}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestShed: Shed closes a client's connection, so every xDS stream on it
// ends with Unavailable: an ADS stream, and an Envoy's per-type streams
// together (one connection, counted as its two streams); the clients on
// other connections, state of the world or delta, go on being served; a
// shed connection stops counting once its streams' handlers have ended,
// and an id no longer open sheds nothing.
func TestShed(t *testing.T) {
	st := baseStore()
	ts := startServer(t, st)
	// One connection per client, opened one after the other: each
	// client's connection is the last one listed once it is served.
	var conns []SheddableConn
	served := func(streams int) {
		t.Helper()
		open := ts.SheddableConns()
		if len(open) != len(conns)+1 || open[len(open)-1].Streams != streams {
			t.Fatalf("connections after %d clients: %+v, want one more with %d streams", len(conns)+1, open, streams)
		}
		conns = append(conns, open[len(open)-1])
	}
	var clients []*xdstest.TestClient
	for _, open := range []func(*grpc.ClientConn) *xdstest.TestClient{
		func(cc *grpc.ClientConn) *xdstest.TestClient { return openADS(t, cc, grpcNode("a", "default")) },
		func(cc *grpc.ClientConn) *xdstest.TestClient { return openADS(t, cc, grpcNode("b", "default")) },
		func(cc *grpc.ClientConn) *xdstest.TestClient { return openDelta(t, cc, envoyNode("c")) },
	} {
		c := open(dial(t, ts.addr))
		c.Subscribe(resource.EndpointType, reviews)
		c.ACK(c.Next())
		clients = append(clients, c)
		served(1)
	}
	envoy := openPerType(t, dial(t, ts.addr), "d")
	served(2)

	if n := ts.Shed(conns[0].ID, conns[3].ID); n != 3 {
		t.Fatalf("Shed found %d streams open, want 3 (one ADS, two per-type)", n)
	}
	if err := clients[0].ExpectEnd(wait); status.Code(err) != codes.Unavailable {
		t.Fatalf("the shed ADS stream ended with %v, want Unavailable", err)
	}
	for i, s := range envoy {
		var err error
		for err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the shed per-type stream %d ended with %v, want Unavailable", i, err)
		}
	}
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"))
	for _, c := range clients[1:] {
		if got := claAddrs(t, c.Next()); !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.3"}) {
			t.Fatalf("%s, not shed, got %v, want the new endpoints", c.Node().GetId(), got)
		}
	}
	testenv.Eventually(t, "the shed streams gone", func() (bool, string) {
		g, e := ts.ClientCounts()
		left := ts.SheddableConns()
		return g == 1 && e == 1 && len(left) == 2 && left[0].ID == conns[1].ID && left[1].ID == conns[2].ID,
			fmt.Sprintf("clients %d grpc %d envoy, connections %+v", g, e, left)
	})
	if n := ts.Shed(conns[0].ID); n != 0 {
		t.Fatalf("shedding a closed connection found %d streams open", n)
	}
	if got := ts.ShedStreams(); got != 3 {
		t.Fatalf("%d streams counted as shed, want 3", got)
	}
}

// serviceProxy stands for a Service in front of replicas: it forwards
// each new connection to the next replica in turn, as kube-proxy picks a
// backend per connection and never moves an open one.
type serviceProxy struct {
	addr     string
	accepted atomic.Int64
}

func startServiceProxy(t *testing.T, replicas ...string) *serviceProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &serviceProxy{addr: lis.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			n := p.accepted.Add(1)
			out, err := net.Dial("tcp", replicas[int(n-1)%len(replicas)])
			if err != nil {
				in.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
			wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
		}
	})
	return p
}

// TestGRPCClientMovesToAnotherReplicaAfterShed: a real grpc-go xDS client
// connected through a Service to replica A is shed by A; it reconnects
// once, on a new connection, which the Service gives to replica B; its
// RPCs go on, it gets B's later pushes, and it NACKs nothing. Ending its
// stream alone would not do: grpc-go opens the next stream on the same
// connection, to A again.
func TestGRPCClientMovesToAnotherReplicaAfterShed(t *testing.T) {
	b2, b3 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	stA, stB := model.NewStore(), model.NewStore()
	svc := service("echo", "default", 9080)
	for _, st := range []*model.Store{stA, stB} {
		st.Update(svc, backendEndpoints(nil, b2, b3))
	}
	a, b := startServer(t, stA), startServer(t, stB)
	svcProxy := startServiceProxy(t, a.addr, b.addr)
	cc := xdsChannel(t, svcProxy.addr, "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, b2, b3)

	first := a.SheddableConns()
	if len(first) != 1 || len(b.SheddableConns()) != 0 {
		t.Fatalf("connections before the shed: A %+v, B %+v; want the client on A", first, b.SheddableConns())
	}
	if n := a.Shed(first[0].ID); n != 1 {
		t.Fatalf("Shed found %d streams, want 1", n)
	}
	testenv.Eventually(t, "the client on B", func() (bool, string) {
		onA, onB := a.SheddableConns(), b.SheddableConns()
		return len(onA) == 0 && len(onB) == 1, fmt.Sprintf("A %+v, B %+v", onA, onB)
	})
	if got := svcProxy.accepted.Load(); got != 2 {
		t.Fatalf("the Service accepted %d connections, want 2: one reconnect", got)
	}
	if _, err := grpctest.Call(context.Background(), cc); err != nil {
		t.Fatalf("an RPC after the shed failed: %v", err)
	}
	stB.Update(svc, backendEndpoints(nil, b3))
	grpctest.AwaitSpread(t, cc, b3)
	for name, s := range map[string]*testServer{"A": a, "B": b} {
		if n := s.NACKs(); n != 0 {
			t.Fatalf("the client sent %s %d NACKs:\n%s", name, n, s.logs.String())
		}
	}
}
