package xds

import (
	"maps"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestLocalityWeights: a locality's weight is its number of HEALTHY
// endpoints. A locality without one is left out for gRPC clients and
// listed without a weight for Envoy; DRAINING and UNHEALTHY endpoints
// stay listed, with their health, wherever their locality is.
func TestLocalityWeights(t *testing.T) {
	const (
		H = model.Healthy
		D = model.Draining
		U = model.Unhealthy
	)
	// noWeight marks a locality listed without load_balancing_weight.
	const noWeight = -1
	type locality struct {
		weight    int
		endpoints int
	}
	for _, tc := range []struct {
		desc  string
		zones map[string][]model.Health
		grpc  map[string]locality
		envoy map[string]locality
	}{
		{
			desc:  "all healthy",
			zones: map[string][]model.Health{"a": {H, H}, "b": {H}},
			grpc:  map[string]locality{"a": {2, 2}, "b": {1, 1}},
			envoy: map[string]locality{"a": {2, 2}, "b": {1, 1}},
		},
		{
			desc:  "a rollout: three of four terminating",
			zones: map[string][]model.Health{"a": {H, D, D, D}, "b": {H, H, H, H}},
			grpc:  map[string]locality{"a": {1, 4}, "b": {4, 4}},
			envoy: map[string]locality{"a": {1, 4}, "b": {4, 4}},
		},
		{
			desc:  "unhealthy endpoints add no weight",
			zones: map[string][]model.Health{"a": {H, U, U}, "b": {H, H}},
			grpc:  map[string]locality{"a": {1, 3}, "b": {2, 2}},
			envoy: map[string]locality{"a": {1, 3}, "b": {2, 2}},
		},
		{
			desc:  "a locality with no healthy endpoint",
			zones: map[string][]model.Health{"a": {D, U}, "b": {H}},
			grpc:  map[string]locality{"b": {1, 1}},
			envoy: map[string]locality{"a": {noWeight, 2}, "b": {1, 1}},
		},
		{
			desc:  "nothing healthy anywhere",
			zones: map[string][]model.Health{"a": {D}, "b": {U}},
			grpc:  map[string]locality{},
			envoy: map[string]locality{"a": {noWeight, 1}, "b": {noWeight, 1}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var eps []*model.Endpoint
			i := 0
			for zone, hs := range tc.zones {
				for _, h := range hs {
					i++
					eps = append(eps, &model.Endpoint{Address: "10.0.0." + itoa(i), Port: 80, ServicePortName: "grpc",
						Health: h, Locality: model.Locality{Region: "r", Zone: zone}})
				}
			}
			st := model.NewStore()
			st.Update(service("svc", "default", 80), eps)
			g := &Generator{Discovery: storeDiscovery{st}}
			name := ClusterName("svc.default.svc.cluster.local", 80)
			for _, c := range []struct {
				client Client
				want   map[string]locality
			}{
				{Client{Namespace: "default", GRPC: true}, tc.grpc},
				{Client{Namespace: "default"}, tc.envoy},
			} {
				m := g.Generate(EndpointType, c.client, name)
				if err := Validate(m); err != nil {
					t.Fatalf("grpc=%v: %v", c.client.GRPC, err)
				}
				got := map[string]locality{}
				for _, l := range m.(*endpoint.ClusterLoadAssignment).GetEndpoints() {
					w := noWeight
					if l.GetLoadBalancingWeight() != nil {
						w = int(l.GetLoadBalancingWeight().GetValue())
					}
					got[l.GetLocality().GetZone()] = locality{w, len(l.GetLbEndpoints())}
				}
				if !maps.Equal(got, c.want) {
					t.Errorf("grpc=%v: localities %v, want %v", c.client.GRPC, got, c.want)
				}
			}
		})
	}
}
