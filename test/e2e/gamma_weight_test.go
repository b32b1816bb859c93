package e2e

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// weightsOf returns the weighted clusters of rc's one route, by cluster.
func weightsOf(rc *route.RouteConfiguration) map[string]uint32 {
	out := map[string]uint32{}
	for _, c := range onlyRoute(rc).GetRoute().GetWeightedClusters().GetClusters() {
		out[c.GetName()] = c.GetWeight().GetValue()
	}
	return out
}

// TestGAMMAMeshHTTPRouteWeight: an HTTPRoute on echo:80 splits 70:30
// between echo-v1 and echo-v2.
func TestGAMMAMeshHTTPRouteWeight(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "httproute-weight.yaml")
	cc := g.channel(t, g.mesh, "echo", 80)
	// The route is served once an Envoy has it; without it, the
	// Service's own route would split evenly over its two endpoints.
	v1, v2 := g.routeName("echo-v1", 8080), g.routeName("echo-v2", 8080)
	g.awaitEnvoyRoutes(t, g.envoy(t, g.mesh), g.routeName("echo", 80), "70:30", func(rc *route.RouteConfiguration) bool {
		w := weightsOf(rc)
		return len(w) == 2 && w[v1] == 70 && w[v2] == 30
	})
	g.awaitServed(t, cc, "/")
	g.awaitWeights(t, cc, "/", map[string]float64{"echo-v1": 0.7, "echo-v2": 0.3})
}

// TestGAMMAMeshGRPCRouteWeight: a GRPCRoute on echo:7070 splits 70:30
// between echo-v1 and echo-v2; echo-v3, of weight 0, does not exist and
// takes nothing.
func TestGAMMAMeshGRPCRouteWeight(t *testing.T) {
	g := startGAMMA(t)
	g.apply(t, "grpcroute-weight.yaml")
	cc := g.channel(t, g.mesh, "echo", 7070)
	const method = "/proto.EchoTestService/Echo"
	v1, v2 := g.routeName("echo-v1", 7070), g.routeName("echo-v2", 7070)
	g.awaitEnvoyRoutes(t, g.envoy(t, g.mesh), g.routeName("echo", 7070), "70:30", func(rc *route.RouteConfiguration) bool {
		w := weightsOf(rc)
		return len(w) == 2 && w[v1] == 70 && w[v2] == 30
	})
	g.awaitServed(t, cc, method)
	g.awaitWeights(t, cc, method, map[string]float64{"echo-v1": 0.7, "echo-v2": 0.3})
}
