package xds

import (
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// BenchmarkLargeSubscription: what the server spends on a client that
// holds 10 000 ClusterLoadAssignments by name (an Envoy with as many
// clusters; its EDS is not a wildcard) and is their only subscriber, the
// worst case for the watch index, whose entries such a client alone
// keeps.
//
//   - repeat: a request that repeats the last, already ACKed (a client
//     re-sending it); it sends nothing.
//   - push-ack: one service's endpoints change; the push answers the
//     client with that one resource and the client ACKs it.
func BenchmarkLargeSubscription(b *testing.B) {
	const services = 10000
	open := func(b *testing.B) (*model.Store, *Server, *memStream, *discovery.DiscoveryRequest) {
		st := benchModel(services, 10)
		s := NewServer(Options{Discovery: st, Policies: model.NewStaticPolicies("istio-system", nil)})
		c := openMemStream(b, s)
		b.Cleanup(c.close)
		names := make([]string, services)
		for i := range names {
			names[i] = model.ClusterName(8080, "", model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", i)))
		}
		c.request(b, &discovery.DiscoveryRequest{Node: grpcNode("envoy", "default"), TypeUrl: resource.EndpointType, ResourceNames: names})
		r := <-c.sent
		if len(r.GetResources()) != services {
			b.Fatalf("%d resources", len(r.GetResources()))
		}
		ack := &discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}
		c.request(b, ack)
		return st, s, c, ack
	}
	b.Run("repeat", func(b *testing.B) {
		_, _, c, ack := open(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			c.request(b, ack)
		}
		b.StopTimer()
		select {
		case r := <-c.sent:
			b.Fatalf("a repeated request was answered with %d resources", len(r.GetResources()))
		default:
		}
	})
	b.Run("push-ack", func(b *testing.B) {
		st, s, c, ack := open(b)
		hot := model.Hostname("svc-0.default.svc.cluster.local")
		svc := st.GetService(hot)
		eps := st.Endpoints(hot, 8080, nil)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			s.Push(moveFirstEndpoint(st, svc, eps, i))
			r := <-c.sent
			if len(r.GetResources()) != 1 {
				b.Fatalf("the push sent %d resources, want the one changed", len(r.GetResources()))
			}
			ack.VersionInfo, ack.ResponseNonce = r.GetVersionInfo(), r.GetNonce()
			c.request(b, ack)
		}
	})
}
