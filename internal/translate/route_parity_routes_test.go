package translate

import (
	"fmt"
	"slices"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// routeParityGenerator serves reviews (port 9080, in default) with the
// VirtualServices given.
func routeParityGenerator(t *testing.T, vss ...*model.VirtualService) (*routeGenerator, string) {
	t.Helper()
	st := model.NewStore()
	svc := service("reviews", "default", 9080)
	st.Update(svc, nil)
	routes := &testRoutes{}
	routes.set(vss...)
	return &routeGenerator{GeneratorOptions{Discovery: st, Routes: routes}}, model.ClusterName(9080, "", svc.Hostname)
}

// generatedRoutes generates a route configuration for c, checks it
// against the envoy protos' rules and returns its routes.
func generatedRoutes(t *testing.T, g *routeGenerator, c *Client, name string) ([]*route.Route, Result) {
	t.Helper()
	res := g.Generate(c, name)
	rc, ok := res.Resource.(*route.RouteConfiguration)
	if !ok {
		t.Fatalf("no route configuration: %v", res.Resource)
	}
	if err := Validate(rc); err != nil {
		t.Fatalf("invalid: %v", err)
	}
	return rc.GetVirtualHosts()[0].GetRoutes(), res
}

// TestWeightsAreRelative: the weights of a route's destinations go to
// weighted_clusters as written, whatever their total, for gRPC clients
// and Envoy alike (both divide by the total), a destination of weight 0
// left out, as istiod writes them.
func TestWeightsAreRelative(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	for _, tc := range []struct {
		name    string
		dests   []model.RouteDestination
		cluster string   // a lone cluster
		want    []string // else subset:weight
	}{
		{"3 and 1", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 3}, {Host: host, Subset: "v2", Weight: 1}}, "", []string{"v1:3", "v2:1"}},
		{"beyond 100", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 150}, {Host: host, Subset: "v2", Weight: 50}}, "", []string{"v1:150", "v2:50"}},
		{"a 0 left out", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 0}, {Host: host, Subset: "v2", Weight: 7}}, "", []string{"v2:7"}},
		{"a lone destination", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 100}}, model.ClusterName(9080, "v1", host), nil},
	} {
		g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
			HTTP: []model.HTTPRoute{{Route: tc.dests}}})
		for _, c := range []*Client{{GRPC: true, Namespace: "default"}, {Namespace: "default"}} {
			routes, _ := generatedRoutes(t, g, c, name)
			a := routes[0].GetRoute()
			if tc.cluster != "" {
				if a.GetCluster() != tc.cluster {
					t.Errorf("%s, gRPC %v: cluster %q, want %q", tc.name, c.GRPC, a.GetCluster(), tc.cluster)
				}
				continue
			}
			var got []string
			for _, cw := range a.GetWeightedClusters().GetClusters() {
				k, _ := model.ParseClusterName(cw.GetName())
				got = append(got, fmt.Sprintf("%s:%d", k.Subset, cw.GetWeight().GetValue()))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s, gRPC %v: weighted clusters %v, want %v", tc.name, c.GRPC, got, tc.want)
			}
		}
	}
}
