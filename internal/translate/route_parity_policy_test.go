package translate

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestRouteHashLookupAsIstiod: a route's hash policy is the destination's
// consistent hash as istiod looks it up: a rule's port-level hash only
// for a destination that names its port (a VirtualService destination
// without one gets the rule's top-level hash, as under istiod, though
// its cluster is the port's), and the service's port for the default
// route.
func TestRouteHashLookupAsIstiod(t *testing.T) {
	st := model.NewStore()
	svc := service("users", "default", 9080)
	st.Update(svc, nil)
	host := svc.Hostname
	policies := &testPolicies{}
	policies.set(&model.DestinationRule{Namespace: "default", Name: "users", Host: host, Policy: &model.TrafficPolicy{
		ConsistentHash: &model.ConsistentHash{HeaderName: "x-top"},
		PortLevel:      map[int32]*model.TrafficPolicy{9080: {ConsistentHash: &model.ConsistentHash{HeaderName: "x-port"}}},
	}})
	routes := &testRoutes{}
	g := &routeGenerator{GeneratorOptions{Discovery: st, Policies: policies, Routes: routes}}
	name := model.ClusterName(9080, "", host)
	header := func() string {
		r := g.Generate(&Client{GRPC: true, Namespace: "default"}, name).Resource.(*route.RouteConfiguration)
		hp := r.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetHashPolicy()
		if len(hp) != 1 {
			t.Fatalf("hash policies %v, want one", hp)
		}
		return hp[0].GetHeader().GetHeaderName()
	}
	routes.set()
	if got := header(); got != "x-port" {
		t.Errorf("default route: %s, want the port's x-port", got)
	}
	for _, tc := range []struct {
		port int32
		want string
	}{
		{0, "x-top"},
		{9080, "x-port"},
	} {
		routes.set(&model.VirtualService{Namespace: "default", Name: "vs", Hosts: []model.Hostname{host},
			HTTP: []model.HTTPRoute{{Route: []model.RouteDestination{{Host: host, Port: tc.port, Weight: 100}}}}})
		if got := header(); got != tc.want {
			t.Errorf("destination port %d: %s, want %s", tc.port, got, tc.want)
		}
	}
}
