package translate

import (
	"fmt"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
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
		{desc: "no outlier detection: no failover", policy: &model.TrafficPolicy{ConnectionPool: &model.ConnectionPool{MaxRequests: 9}}, client: "r1/z1/s1",
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
			mesh.Set(&model.MeshSettings{TrustDomain: model.DefaultTrustDomain, LocalityLB: tc.lb})
			policies := &testPolicies{}
			if tc.policy != nil {
				policies.set(&model.DestinationRule{Namespace: "default", Name: "svc", Host: svc.Hostname, Policy: tc.policy})
			} else {
				policies.set()
			}
			m := generateWith(GeneratorOptions{Discovery: st, Mesh: mesh, Policies: policies})
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
