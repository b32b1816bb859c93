package translate

import (
	"maps"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

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
			g := generate(st)
			name := model.ClusterName(80, "", "svc.default.svc.cluster.local")
			for _, c := range []struct {
				client Client
				want   map[string]locality
			}{
				{Client{Namespace: "default", GRPC: true}, tc.grpc},
				{Client{Namespace: "default"}, tc.envoy},
			} {
				m := g.endpoints(t, c.client, name)
				if err := Validate(m); err != nil {
					t.Fatalf("grpc=%v: %v", c.client.GRPC, err)
				}
				got := map[string]locality{}
				for _, l := range m.GetEndpoints() {
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

// TestClusterOptions: EDS clusters set a healthy panic threshold of 0, so
// that Envoy never balances over hosts that are not HEALTHY; ports that
// speak HTTP/2 (gRPC, gRPC-Web, HTTP2, which includes appProtocol
// kubernetes.io/h2c) tell Envoy to use HTTP/2 upstream, as Istio does;
// other ports leave Envoy's default (HTTP/1.1 for HTTP routes).
func TestClusterOptions(t *testing.T) {
	for _, tc := range []struct {
		protocol   model.Protocol
		resolution model.Resolution
		h2         bool
	}{
		{model.GRPC, model.ClientSideLB, true},
		{model.HTTP2, model.ClientSideLB, true},
		{model.GRPCWeb, model.ClientSideLB, true},
		{model.HTTP, model.ClientSideLB, false},
		{model.Unsupported, model.ClientSideLB, false},
		{model.TCP, model.ClientSideLB, false},
		{model.HTTPS, model.ClientSideLB, false},
		{model.GRPC, model.Passthrough, true},
		{model.GRPC, model.DNSAlias, true},
		{model.HTTP, model.DNSAlias, false},
	} {
		t.Run(string(tc.protocol)+"/"+tc.resolution.String(), func(t *testing.T) {
			svc := &model.Service{Hostname: "svc.default.svc.cluster.local", Name: "svc", Namespace: "default",
				Resolution: tc.resolution, Ports: []model.Port{{Name: "p", Port: 80, Protocol: tc.protocol}}}
			if tc.resolution == model.DNSAlias {
				svc.ExternalName = "svc.example.com"
			}
			st := model.NewStore()
			st.Update(svc, nil)
			c := generate(st).cluster(t, model.ClusterName(80, "", svc.Hostname))
			if err := Validate(c); err != nil {
				t.Fatal(err)
			}
			threshold := c.GetCommonLbConfig().GetHealthyPanicThreshold()
			if eds := tc.resolution != model.DNSAlias; eds != (threshold != nil && threshold.GetValue() == 0) {
				t.Errorf("healthy_panic_threshold %v on a cluster of type %v", threshold, c.GetType())
			}
			opts := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
			if !tc.h2 {
				if len(c.GetTypedExtensionProtocolOptions()) != 0 {
					t.Fatalf("protocol options %v", c.GetTypedExtensionProtocolOptions())
				}
				return
			}
			var o httpoptions.HttpProtocolOptions
			if err := opts.UnmarshalTo(&o); err != nil {
				t.Fatalf("%s: %v", httpProtocolOptionsKey, err)
			}
			if o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
				t.Fatalf("no explicit HTTP/2: %v", &o)
			}
		})
	}
}

// TestValidateClusterProtocolOptions: Validate looks inside the Any of
// typed_extension_protocol_options, which ValidateAll does not.
func TestValidateClusterProtocolOptions(t *testing.T) {
	anyOf := func(m proto.Message) *anypb.Any {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		desc string
		opts map[string]*anypb.Any
	}{
		{"no upstream protocol", map[string]*anypb.Any{httpProtocolOptionsKey: anyOf(&httpoptions.HttpProtocolOptions{})}},
		{"another type under the key", map[string]*anypb.Any{httpProtocolOptionsKey: anyOf(&cluster.Cluster{})}},
		{"an unknown extension", map[string]*anypb.Any{"envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions": anyOf(&httpoptions.HttpProtocolOptions{})}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := &cluster.Cluster{Name: "c", ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
				EdsClusterConfig:              &cluster.Cluster_EdsClusterConfig{EdsConfig: adsSource},
				TypedExtensionProtocolOptions: tc.opts}
			if err := c.ValidateAll(); err != nil {
				t.Fatalf("the case must pass the generated validation: %v", err)
			}
			if err := Validate(c); err == nil {
				t.Fatal("Validate accepted it")
			}
		})
	}
}
