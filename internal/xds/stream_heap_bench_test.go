package xds

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// BenchmarkStreamHeap: the heap an open ADS stream costs, measured after
// a garbage collection with N gRPC clients' streams open, each holding K
// clusters and their ClusterLoadAssignments (ACKed). A warm stream holds
// every resource for the whole run, so that the figure is the streams'
// own state, not the shared resources. It includes the client side of
// each stream (grpc-go's client stream, in this process too), which a
// change of the server leaves as it is.
func BenchmarkStreamHeap(b *testing.B) {
	const services, streams, perStream, streamsPerConn = 200, 400, 10, 100
	st := benchModel(services, 5)
	ts := startServer(b, st)
	var all []string
	for i := range services {
		all = append(all, model.ClusterName(8080, "", model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", i))))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*grpc.ClientConn, streams/streamsPerConn+1)
	for i := range conns {
		conns[i] = dial(b, ts.addr)
	}
	open := func(ctx context.Context, cc *grpc.ClientConn, id string, names []string) {
		a, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err != nil {
			b.Fatal(err)
		}
		node := grpcNode(id, "default")
		for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
			if err := a.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names}); err != nil {
				b.Fatal(err)
			}
			r, err := a.Recv()
			if err != nil {
				b.Fatal(err)
			}
			if len(r.GetResources()) != len(names) {
				b.Fatalf("%s: %d resources, want %d", typ, len(r.GetResources()), len(names))
			}
			err = a.Send(&discovery.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	open(ctx, conns[len(conns)-1], "warm", all)
	awaitStats(b, ts.Server, func(s Stats) bool { return s.Watches == 2 }, "the warm stream's watches")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		before := liveheap.AfterGC()
		sctx, scancel := context.WithCancel(ctx)
		b.StartTimer()
		for i := range streams {
			names := make([]string, perStream)
			for k := range names {
				names[k] = all[(i*perStream+k*7)%services]
			}
			open(sctx, conns[i/streamsPerConn], fmt.Sprint("client-", i), names)
		}
		awaitStats(b, ts.Server, func(s Stats) bool { return s.Watches == 2+2*streams }, "every stream's watches")
		b.StopTimer()
		after := liveheap.AfterGC()
		b.ReportMetric(float64(after-before)/streams, "B/stream")
		scancel()
		awaitStats(b, ts.Server, func(s Stats) bool { return s.Watches == 2 }, "the streams closed")
		b.StartTimer()
	}
}

// copyNames copies names and their strings, as a request read from the
// wire holds its own.
func copyNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.Clone(n)
	}
	return out
}

// BenchmarkConvergedStreamHeap: the server's heap per converged client,
// as meshbench's clients are at "converged": 2000 gRPC clients on 200
// services, each subscribed to 5 of them by LDS, RDS, CDS and EDS (20
// resources), every response ACKed. The streams are in-memory
// (memstream_test.go), so the figure is meshpilot's own state per
// stream (stream, subscriptions, watches and their index, client
// state, node; each request with its own strings, as read from the
// wire) without grpc-go's per-stream objects (TestStreamCost's
// idle stream has them) and without any client side. A warm stream
// holds every resource for the whole run: shared resources are not the
// streams' cost.
func BenchmarkConvergedStreamHeap(b *testing.B) {
	const services, clients, perClient = 200, 2000, 5
	st := benchModel(services, 5)
	s := NewServer(Options{Discovery: st})
	converge := func(c *memStream, node *core.Node, listeners []string) {
		b.Helper()
		var routes []string
		for _, l := range listeners {
			host, _, _ := strings.Cut(l, ":")
			routes = append(routes, model.ClusterName(8080, "", model.Hostname(host+".default.svc.cluster.local")))
		}
		slices.Sort(routes)
		for i, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
			names := routes
			if i == 0 {
				names = listeners
			}
			req := &discovery.DiscoveryRequest{TypeUrl: typ, ResourceNames: copyNames(names)}
			if i == 0 {
				req.Node = node
			}
			c.request(b, req)
			r := <-c.sent
			if len(r.GetResources()) != len(names) {
				b.Fatalf("%s: %d resources, want %d", typ, len(r.GetResources()), len(names))
			}
			c.ack(b, r, copyNames(names))
		}
	}
	listenersOf := func(i int) []string {
		var out []string
		for k := range perClient {
			out = append(out, fmt.Sprintf("svc-%d:8080", (i*perClient+k*7)%services))
		}
		slices.Sort(out)
		return out
	}
	var all []string
	for i := range services {
		all = append(all, fmt.Sprintf("svc-%d:8080", i))
	}
	slices.Sort(all)
	warm := openMemStream(b, s)
	defer warm.close()
	converge(warm, grpcNode("warm", "default"), all)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		before := liveheap.AfterGC()
		b.StartTimer()
		cs := make([]*memStream, clients)
		for i := range cs {
			cs[i] = openMemStream(b, s)
			ip := fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)
			node := xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID(ip, fmt.Sprint("bench-client-", i), "default"), Namespace: "default"})
			converge(cs[i], node, listenersOf(i))
		}
		b.StopTimer()
		after := liveheap.AfterGC()
		b.ReportMetric(float64(after-before)/clients, "B/client")
		for _, c := range cs {
			c.close()
		}
		b.StartTimer()
	}
}
