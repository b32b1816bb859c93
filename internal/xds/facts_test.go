package xds

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// testInventory knows the namespaces, nodes and remote clusters listed.
type testInventory struct{ namespaces, nodes, clusters []string }

func (i testInventory) HasNamespace(n string) bool { return slices.Contains(i.namespaces, n) }
func (i testInventory) HasNode(n string) bool      { return slices.Contains(i.nodes, n) }
func (i testInventory) HasCluster(id string) bool  { return slices.Contains(i.clusters, id) }

// TestMadeUpFactsShareVariants: resources that vary by the client's
// namespace (a DestinationRule only its own namespace's clients see), node
// (internalTrafficPolicy Local) and cluster (a cluster-local host) keep a
// bounded number of variants when a thousand clients each name a
// namespace, node and cluster that do not exist, and each of those
// clients gets what it would have got under its own names; a real
// namespace, node and cluster keep their own view.
func TestMadeUpFactsShareVariants(t *testing.T) {
	st := model.NewStore()
	echo := service("echo", "echo", 7070)
	st.Update(echo, nil)
	local := service("local", "default", 80)
	local.InternalTrafficPolicy = model.InternalTrafficLocal
	st.Update(local, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Health: model.Healthy, NodeName: "node-1"},
		{Address: "10.0.0.2", Port: 80, ServicePortName: "grpc", Health: model.Healthy, NodeName: "node-2"},
	})
	api := service("api", "kube-system", 80) // cluster-local by Istio's defaults
	st.Update(api, []*model.Endpoint{
		{Address: "10.0.3.1", Port: 80, ServicePortName: "grpc", Health: model.Healthy},
		{Address: "10.1.3.1", Port: 80, ServicePortName: "grpc", Health: model.Healthy, ClusterID: "west"},
	})
	rules := []*model.DestinationRule{
		{Namespace: "team-a", Name: "r", Host: echo.Hostname, Policy: &model.TrafficPolicy{LoadBalancer: model.LBLeastRequest}},
	}
	m := &servedModel{s: NewServer(Options{Discovery: st, Policies: model.NewStaticPolicies("istio-system", rules),
		Inventory: testInventory{
			namespaces: []string{"default", "echo", "kube-system", "team-a", "team-b"},
			nodes:      []string{"node-1", "node-2"},
			clusters:   []string{"west"},
		}})}
	echoCluster := model.ClusterName(7070, "", echo.Hostname)
	localCLA := model.ClusterName(80, "", local.Hostname)
	apiCLA := model.ClusterName(80, "", api.Hostname)

	// served is what one client gets: the cluster's lb_policy, and the
	// endpoints of local and of api.
	served := func(ns, node, clusterID string) string {
		t.Helper()
		n := xdstest.GRPCNode(xdstest.NodeOptions{ID: "c", Namespace: ns, Metadata: map[string]string{"NODE_NAME": node, "CLUSTER_ID": clusterID}})
		c := m.s.client(n)
		cl, _ := m.get(t, resource.ClusterType, c, echoCluster).(*cluster.Cluster)
		l, _ := m.get(t, resource.EndpointType, c, localCLA).(*endpoint.ClusterLoadAssignment)
		a, _ := m.get(t, resource.EndpointType, c, apiCLA).(*endpoint.ClusterLoadAssignment)
		return cl.GetLbPolicy().String() + " local=" + strings.Join(translatetest.LBEndpoints(l), ",") + " api=" + strings.Join(translatetest.LBEndpoints(a), ",")
	}

	for _, tc := range []struct{ ns, node, cluster, want string }{
		{"team-a", "node-1", "", "LEAST_REQUEST local=10.0.0.1 api=10.0.3.1"},
		{"team-b", "node-2", "west", "ROUND_ROBIN local=10.0.0.2 api=10.1.3.1=;;;;west"},
		{"", "", "Kubernetes", "ROUND_ROBIN local= api=10.0.3.1"},
	} {
		if got := served(tc.ns, tc.node, tc.cluster); got != tc.want {
			t.Errorf("client of namespace %q, node %q, cluster %q: got %s, want %s", tc.ns, tc.node, tc.cluster, got, tc.want)
		}
	}
	before := m.s.Stats().Resources

	// A made-up name gets what it got before the names were checked:
	// another namespace's rules do not apply, no endpoint is on its node,
	// and no cluster-local endpoint is in its cluster.
	const madeUp = "ROUND_ROBIN local= api="
	long := strings.Repeat("x", 100)
	for i := range 1000 {
		id := strconv.Itoa(i)
		if got := served("ns-"+long+id, "node-"+long+id, "cluster-"+long+id); got != madeUp {
			t.Fatalf("client %d of made-up names: got %s, want %s", i, got, madeUp)
		}
	}
	// The made-up names add one variant of each resource at most: that
	// of no namespace, no node and an unknown cluster.
	if got := m.s.Stats().Resources; got > before+3 {
		t.Fatalf("%d resources cached after 1000 clients of made-up names, %d before: want at most %d", got, before, before+3)
	}

	// A real namespace, node and cluster still have their own.
	if got, want := served("team-a", "node-2", "west"), "LEAST_REQUEST local=10.0.0.2 api=10.1.3.1=;;;;west"; got != want {
		t.Errorf("client of team-a, node-2, west: got %s, want %s", got, want)
	}
}

// TestRealNodeOfMadeUpNodeName: a client whose NODE_NAME names no node
// but whose address is a known workload's gets the workload's node.
func TestRealNodeOfMadeUpNodeName(t *testing.T) {
	s := NewServer(Options{Discovery: model.NewStore(), Inventory: testInventory{nodes: []string{"node-1"}},
		Workloads: workloadsByIP{"10.0.0.7": {Name: "p", Namespace: "default", NodeName: "node-1"}}})
	n := xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.7", "p", "default"), Metadata: map[string]string{"NODE_NAME": "made-up"}})
	if c := s.client(n); c.NodeName != "node-1" {
		t.Fatalf("node %q, want the workload's node-1", c.NodeName)
	}
}
