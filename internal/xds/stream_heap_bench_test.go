package xds

import (
	"context"
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/model"
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
		for _, typ := range []string{ClusterType, EndpointType} {
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
		before := heapAfterGC()
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
		after := heapAfterGC()
		b.ReportMetric(float64(after-before)/streams, "B/stream")
		scancel()
		awaitStats(b, ts.Server, func(s Stats) bool { return s.Watches == 2 }, "the streams closed")
		b.StartTimer()
	}
}
