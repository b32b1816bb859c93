package xds

import (
	"fmt"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// BenchmarkConverge: what a client's first subscription costs the
// server: 1000 gRPC clients, each asking for 10 of 10 000 services, LDS
// then RDS, CDS and EDS, each response ACKed, as grpc-go does on start.
// An op is one client converging.
func BenchmarkConverge(b *testing.B) {
	const services, perClient = 10000, 10
	st := benchModel(services, 10)
	// An empty rule index, as serve always has one: what reads rules
	// costs a converging client its keys even when there are none.
	s := NewServer(Options{Discovery: st, Policies: model.NewStaticPolicies("istio-system", nil)})
	watch := func(c *memStream, node *core.Node, typ string, names []string) *discovery.DiscoveryResponse {
		b.Helper()
		c.request(b, &discovery.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names})
		r := <-c.sent
		c.ack(b, r, names)
		return r
	}
	// Each client holds what it was sent (and so the cache keeps it), as
	// the server's client state does while its stream is open; its
	// stream closes once it has converged, which leaves no watch behind.
	var held []*entry
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
		c := openMemStream(b, s)
		cn := grpcNode(node, "default")
		r := watch(c, cn, resource.ListenerType, listeners)
		if len(r.GetResources()) != perClient {
			b.Fatalf("%d listeners", len(r.GetResources()))
		}
		watch(c, cn, resource.RouteType, clusters)
		watch(c, cn, resource.ClusterType, clusters)
		watch(c, cn, resource.EndpointType, clusters)
		held = append(held, c.held()...)
		c.close()
	}
}
