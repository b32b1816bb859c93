package bench

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestSplitKey(t *testing.T) {
	split := func(weights ...uint32) *route.Route {
		wc := &route.WeightedCluster{}
		for i, w := range weights {
			wc.Clusters = append(wc.Clusters, &route.WeightedCluster_ClusterWeight{Name: string(rune('a' + i)), Weight: wrapperspb.UInt32(w)})
		}
		return &route.Route{Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_WeightedClusters{WeightedClusters: wc}}}}
	}
	single := &route.Route{Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "c"}}}}
	for _, tc := range []struct {
		name   string
		routes []*route.Route
		want   string
	}{
		{"no routes", nil, ""},
		{"one cluster", []*route.Route{single}, ""},
		{"the first split counts", []*route.Route{single, split(80, 20), split(1, 99)}, "rc#80,20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := readRouteConfig(mustMarshal(t, &route.RouteConfiguration{Name: "rc", VirtualHosts: []*route.VirtualHost{{Routes: tc.routes}}}))
			if err != nil || rc.split != tc.want {
				t.Fatalf("split = %q, %v; want %q", rc.split, err, tc.want)
			}
		})
	}
	svc := &service{hostname: "svc-1.ns.svc.cluster.local"}
	if got, want := expectedSplitKey(svc, 81), "outbound|7070||svc-1.ns.svc.cluster.local#81,19"; got != want {
		t.Fatalf("expectedSplitKey = %q, want %q", got, want)
	}
}

// Every route change gives v1 a weight other than its current one, and
// weights stay a split that sends some traffic to both subsets.
func TestNextV1WeightAlwaysChanges(t *testing.T) {
	w := uint32(initialV1Weight)
	for range 200 {
		next := nextV1Weight(w)
		if next == w || next < 1 || next > 99 {
			t.Fatalf("nextV1Weight(%d) = %d", w, next)
		}
		w = next
	}
}
