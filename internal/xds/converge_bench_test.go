package xds

import (
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// BenchmarkConverge: what a client's first subscription costs the
// server: 1000 gRPC clients, each asking for 10 of 10 000 services, LDS
// then RDS, CDS and EDS, each response ACKed, as grpc-go does on start.
// An op is one client converging.
func BenchmarkConverge(b *testing.B) {
	const services, perClient = 10000, 10
	st := benchModel(services, 10)
	s := NewServer(Options{Discovery: st})
	watch := func(node string, typ string, names []string) cache.Response {
		sub := stream.NewSotwSubscription(names, false)
		ch := make(chan cache.Response, 1)
		req := &discovery.DiscoveryRequest{Node: grpcNode(node, "default"), TypeUrl: typ, ResourceNames: names}
		if _, err := s.CreateWatch(req, sub, ch); err != nil {
			b.Fatal(err)
		}
		r := <-ch
		sub.SetReturnedResources(r.GetReturnedResources())
		ack := &discovery.DiscoveryRequest{Node: req.Node, TypeUrl: typ, ResourceNames: names, ResponseNonce: "1", VersionInfo: r.GetResponseVersion()}
		cancel, err := s.CreateWatch(ack, sub, make(chan cache.Response, 1))
		if err != nil {
			b.Fatal(err)
		}
		cancel()
		return r
	}
	// Each client holds what it was sent (and so the cache keeps it), as
	// the server's client state does while its stream is open.
	var held []cache.Response
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		node := fmt.Sprint("client-", i)
		var listeners, clusters []string
		for k := range perClient {
			n := (i*perClient + k*7919) % services
			listeners = append(listeners, fmt.Sprintf("svc-%d:8080", n))
			clusters = append(clusters, model.ClusterName(8080, "", model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", n))))
		}
		r := watch(node, ListenerType, listeners)
		out, _ := r.GetDiscoveryResponse()
		if len(out.GetResources()) != perClient {
			b.Fatalf("%d listeners", len(out.GetResources()))
		}
		held = append(held, r, watch(node, RouteType, clusters), watch(node, ClusterType, clusters), watch(node, EndpointType, clusters))
	}
}
