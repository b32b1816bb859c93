package xds

import (
	"fmt"
	"strings"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestMeshLocalityLB: MeshConfig's localityLbSetting orders and weighs a
// client's endpoints by locality as Istio does; failover only for a
// cluster with outlier detection; a service's trafficDistribution first.
func TestMeshLocalityLB(t *testing.T) {
	eps := []struct{ addr, locality string }{
		{"10.0.0.1", "r1/z1/s1"},
		{"10.0.0.2", "r1/z1/s2"},
		{"10.0.0.3", "r1/z2/s1"},
		{"10.0.1.1", "r2/z1/s1"},
		{"10.0.2.1", "r3/z1/s1"},
	}
	ejecting := &model.TrafficPolicy{OutlierDetection: &model.OutlierDetection{Interval: time.Second}}
	for _, tc := range []struct {
		desc   string
		lb     *model.LocalityLB
		policy *model.TrafficPolicy // the rule's; nil: no rule
		dist   model.TrafficDistribution
		client string // its locality
		want   string // "priority:locality:addrs:weight;..." in order
	}{
		{desc: "Istio's default mesh, outlier detection: closest first", policy: ejecting, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;1:r1/z1/s2:10.0.0.2:1;2:r1/z2/s1:10.0.0.3:1;3:r2/z1/s1:10.0.1.1:1;3:r3/z1/s1:10.0.2.1:1"},
		{desc: "no outlier detection: no failover", policy: &model.TrafficPolicy{MaxRequests: 9}, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;0:r1/z2/s1:10.0.0.3:1;0:r2/z1/s1:10.0.1.1:1;0:r3/z1/s1:10.0.2.1:1"},
		{desc: "no rule: no failover", client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;0:r1/z2/s1:10.0.0.3:1;0:r2/z1/s1:10.0.1.1:1;0:r3/z1/s1:10.0.2.1:1"},
		{desc: "a failover region before the others", lb: &model.LocalityLB{Failover: []model.LocalityFailover{{From: "r1", To: "r3"}}},
			policy: ejecting, client: "r1/z2/s9",
			want: "0:r1/z2/s1:10.0.0.3:1;1:r1/z1/s1:10.0.0.1:1;1:r1/z1/s2:10.0.0.2:1;2:r3/z1/s1:10.0.2.1:1;3:r2/z1/s1:10.0.1.1:1"},
		{desc: "a failover entry of another region", lb: &model.LocalityLB{Failover: []model.LocalityFailover{{From: "r2", To: "r3"}}},
			policy: ejecting, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;1:r1/z1/s2:10.0.0.2:1;2:r1/z2/s1:10.0.0.3:1;3:r2/z1/s1:10.0.1.1:1;3:r3/z1/s1:10.0.2.1:1"},
		{desc: "disabled", lb: &model.LocalityLB{Disabled: true}, policy: ejecting, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;0:r1/z2/s1:10.0.0.3:1;0:r2/z1/s1:10.0.1.1:1;0:r3/z1/s1:10.0.2.1:1"},
		{desc: "failoverPriority alone: the client's labels are unknown", lb: &model.LocalityLB{FailoverPriority: []string{"version"}},
			policy: ejecting, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;0:r1/z2/s1:10.0.0.3:1;0:r2/z1/s1:10.0.1.1:1;0:r3/z1/s1:10.0.2.1:1"},
		{desc: "distribute: shares split by weight, unnamed localities left out",
			lb: &model.LocalityLB{Distribute: []model.LocalityDistribute{
				{From: "r2/*", To: map[string]uint32{"r2": 100}},
				{From: "r1/z1/*", To: map[string]uint32{"r1/z1/*": 75, "r2/*": 25}},
			}}, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:38;0:r1/z1/s2:10.0.0.2:38;0:r2/z1/s1:10.0.1.1:25"},
		{desc: "distribute: no entry for the client's locality",
			lb:     &model.LocalityLB{Distribute: []model.LocalityDistribute{{From: "r2", To: map[string]uint32{"r2": 100}}}},
			client: "r1/z1/s1",
			want:   "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;0:r1/z2/s1:10.0.0.3:1;0:r2/z1/s1:10.0.1.1:1;0:r3/z1/s1:10.0.2.1:1"},
		{desc: "trafficDistribution before the mesh's setting", dist: model.PreferSameZone, policy: ejecting, client: "r1/z1/s1",
			want: "0:r1/z1/s1:10.0.0.1:1;0:r1/z1/s2:10.0.0.2:1;1:r1/z2/s1:10.0.0.3:1;1:r2/z1/s1:10.0.1.1:1;1:r3/z1/s1:10.0.2.1:1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := model.NewStore()
			svc := service("svc", "default", 80)
			svc.TrafficDistribution = tc.dist
			var list []*model.Endpoint
			for _, e := range eps {
				list = append(list, &model.Endpoint{Address: e.addr, Port: 80, ServicePortName: "grpc", Locality: model.ParseLocality(e.locality)})
			}
			st.Update(svc, list)
			mesh := &testMesh{}
			mesh.p.Store(&model.MeshSettings{TrustDomain: model.DefaultTrustDomain, LocalityLB: tc.lb})
			policies := &testPolicies{}
			if tc.policy != nil {
				policies.set(&model.DestinationRule{Namespace: "default", Name: "svc", Host: svc.Hostname, Policy: tc.policy})
			} else {
				policies.set()
			}
			m := &servedModel{s: NewServer(Options{Discovery: st, Mesh: mesh, Policies: policies})}
			c := Client{Namespace: "default", GRPC: true, Locality: model.ParseLocality(tc.client)}
			cla := m.endpoints(t, c, model.ClusterName(80, "", svc.Hostname))
			if err := Validate(cla); err != nil {
				t.Fatal(err)
			}
			s := describeLocalities(cla, func(l *endpoint.LocalityLbEndpoints, addrs string) string {
				loc := l.GetLocality()
				return fmt.Sprintf("%d:%s/%s/%s:%s:%d", l.GetPriority(), loc.GetRegion(), loc.GetZone(), loc.GetSubZone(),
					addrs, l.GetLoadBalancingWeight().GetValue())
			})
			if s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
		})
	}
}

// TestMeshPartsWakeOnlyTheirReaders: a change of the mesh's locality
// setting wakes endpoint assignments only, one of the retry policy routes
// only, and one of the trust domain nothing served here.
func TestMeshPartsWakeOnlyTheirReaders(t *testing.T) {
	st := model.NewStore()
	st.Update(service("reviews", "default", 9080), []*model.Endpoint{
		{Address: "10.0.0.1", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.0.2", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r2"}},
	})
	mesh := &testMesh{}
	settings := model.DefaultMeshSettings()
	mesh.p.Store(settings)
	ts := startServer(t, st, withMesh(mesh))
	routes, eds := reviewsReaders(t, ts, model.MeshRetryKey, model.MeshLocalityLBKey)
	change := func(key model.ConfigKey, edit func(m *model.MeshSettings), watches int) {
		t.Helper()
		next := *settings
		edit(&next)
		settings = &next
		mesh.p.Store(settings)
		before := len(ts.logs.String())
		ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: key}))
		checkPushWoke(t, ts, before, "a change of "+key.String(), watches)
	}

	change(model.MeshLocalityLBKey, func(m *model.MeshSettings) {
		m.LocalityLB = &model.LocalityLB{Distribute: []model.LocalityDistribute{{From: "*", To: map[string]uint32{"r1": 100}}}}
	}, 1)
	r := eds.Next()
	eds.ACK(r)
	if got := claAddrs(t, r)[reviews]; r.TypeURL != resource.EndpointType || strings.Join(got, ",") != "10.0.0.1" {
		t.Fatalf("after distributing all to r1: %s %v, want reviews' endpoint in r1 alone", r.TypeURL, got)
	}
	change(model.MeshRetryKey, func(m *model.MeshSettings) { m.DefaultHTTPRetry = &model.HTTPRetry{} }, 1)
	r = routes.Next()
	routes.ACK(r)
	if r.TypeURL != resource.RouteType || routeRetry(routes.RouteConfiguration(reviews)) != nil {
		t.Fatalf("after attempts 0: %s, retry policy %v; want the route without one", r.TypeURL, routeRetry(routes.RouteConfiguration(reviews)))
	}
	change(model.MeshTrustDomainKey, func(m *model.MeshSettings) { m.TrustDomain = "example.org" }, 0)
	// The EDS client's next response is its next change.
	st.Update(service("reviews", "default", 9080), []*model.Endpoint{
		{Address: "10.0.0.3", Port: 9080, ServicePortName: "grpc", Health: model.Healthy, Locality: model.Locality{Region: "r1"}},
	})
	if got := claAddrs(t, eds.Next())[reviews]; strings.Join(got, ",") != "10.0.0.3" {
		t.Fatalf("EDS client got %v, want reviews' new endpoint", got)
	}
}

// TestLocalityVariantsShared: locality failover makes an endpoint
// assignment vary by the client's locality only when it moves something:
// a cluster without outlier detection, or with endpoints in one locality,
// is one resource for every client.
func TestLocalityVariantsShared(t *testing.T) {
	st := model.NewStore()
	spread, single := service("spread", "default", 80), service("single", "default", 80)
	st.Update(spread, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.1.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r2"}},
	})
	st.Update(single, []*model.Endpoint{
		{Address: "10.0.2.1", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
		{Address: "10.0.2.2", Port: 80, ServicePortName: "grpc", Locality: model.Locality{Region: "r1"}},
	})
	ejecting := &model.TrafficPolicy{OutlierDetection: &model.OutlierDetection{Interval: time.Second}}
	for _, tc := range []struct {
		desc     string
		policy   *model.TrafficPolicy
		marshals uint64
	}{
		{"no outlier detection: one for all", &model.TrafficPolicy{MaxRequests: 1}, 1 + 1},
		{"outlier detection: one per client region where endpoints are spread", ejecting, 2 + 1},
	} {
		policies := &testPolicies{}
		policies.set(
			&model.DestinationRule{Namespace: "default", Name: "spread", Host: spread.Hostname, Policy: tc.policy},
			&model.DestinationRule{Namespace: "default", Name: "single", Host: single.Hostname, Policy: tc.policy},
		)
		m := &servedModel{s: NewServer(Options{Discovery: st, Policies: policies})}
		for i := range 10 {
			c := Client{Namespace: "default", GRPC: true, Locality: model.Locality{Region: []string{"r1", "r2"}[i%2]}}
			first := m.endpoints(t, c, model.ClusterName(80, "", spread.Hostname)).GetEndpoints()[0]
			if tc.policy.OutlierDetection != nil && first.GetLocality().GetRegion() != c.Locality.Region {
				t.Errorf("%s: a client of %s gets %v first", tc.desc, c.Locality.Region, first.GetLocality())
			}
			m.endpoints(t, c, model.ClusterName(80, "", single.Hostname))
		}
		if got := m.s.Stats().Marshals; got != tc.marshals {
			t.Errorf("%s: %d marshals for 10 clients in 2 regions, want %d", tc.desc, got, tc.marshals)
		}
	}
}
