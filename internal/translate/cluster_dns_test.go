package translate

import (
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestDNSEndpointsCluster: a DNS ServiceEntry with endpoints has a cluster
// that carries them, so it depends on the host's endpoints (a change of
// them resends the cluster) and differs by client kind; with no endpoint
// there is no cluster, until one comes.
func TestDNSEndpointsCluster(t *testing.T) {
	svc := &model.Service{Hostname: "mirrors.example.com", Name: "mirrors.example.com", Namespace: "ext",
		Resolution: model.DNSAlias, Ports: []model.Port{{Name: "grpc", Port: 80, Protocol: model.GRPC}}}
	st := model.NewStore()
	st.Update(svc, nil)
	g := &clusterGenerator{GeneratorOptions{Discovery: st}}
	name := model.ClusterName(80, "", svc.Hostname)
	if r := g.Generate(&Client{GRPC: true}, name); r.Resource != nil || !slices.Contains(r.Deps, model.EndpointsKey(svc.Hostname)) {
		t.Fatalf("without endpoints: resource %v, deps %v; want none, depending on the endpoints", r.Resource, r.Deps)
	}
	st.Update(svc, []*model.Endpoint{
		{Address: "b.mirrors.example.com", Port: 80, ServicePortName: "grpc"},
		{Address: "a.mirrors.example.com", Port: 80, ServicePortName: "grpc"},
	})
	for _, tc := range []struct {
		grpc  bool
		typ   cluster.Cluster_DiscoveryType
		hosts int
	}{
		{true, cluster.Cluster_LOGICAL_DNS, 1},
		{false, cluster.Cluster_STRICT_DNS, 2},
	} {
		r := g.Generate(&Client{GRPC: tc.grpc}, name)
		c, _ := r.Resource.(*cluster.Cluster)
		if c == nil || c.GetType() != tc.typ || r.Vary != VaryKind || !slices.Contains(r.Deps, model.EndpointsKey(svc.Hostname)) {
			t.Fatalf("grpc %v: cluster %v, vary %b, deps %v", tc.grpc, c, r.Vary, r.Deps)
		}
		if err := Validate(c); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range c.GetLoadAssignment().GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				got = append(got, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
		if len(got) != tc.hosts || got[0] != "a.mirrors.example.com" {
			t.Fatalf("grpc %v: addresses %v", tc.grpc, got)
		}
	}
}
