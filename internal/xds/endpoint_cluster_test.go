package xds

import (
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestSingleClusterSharesEndpoints: with every endpoint in the local
// cluster, clients that name the local cluster, name none, or name
// another cluster share one marshalled resource without metadata, and a
// cluster-local host is still one resource for every local client.
func TestSingleClusterSharesEndpoints(t *testing.T) {
	st := model.NewStore()
	svc := service("solo", "default", 80)
	st.Update(svc, endpoints(80, model.Healthy, "10.0.0.1", "10.0.0.2"))
	local := service("api", "kube-system", 80) // cluster-local by Istio's defaults
	st.Update(local, endpoints(80, model.Healthy, "10.0.3.1"))
	m := serve(st)
	for i, id := range []string{"", "Kubernetes", "cluster-b", ""} {
		o := xdstest.NodeOptions{ID: "client-" + itoa(i), Namespace: "default"}
		if id != "" {
			o.Metadata = map[string]string{"CLUSTER_ID": id}
		}
		c := m.s.client(xdstest.GRPCNode(o))
		cla := m.endpoints(t, c, model.ClusterName(80, "", svc.Hostname))
		if got := strings.Join(translatetest.LBEndpoints(cla), ","); got != "10.0.0.1,10.0.0.2" {
			t.Fatalf("client of %q: got %s", id, got)
		}
		if id != "cluster-b" {
			m.endpoints(t, c, model.ClusterName(80, "", local.Hostname))
		}
	}
	if got := m.s.Stats().Marshals; got != 2 {
		t.Errorf("%d marshals for clients of one cluster, want 2 (one per host)", got)
	}
}

// TestClusterLocalPushed: a client of cluster-b on a stream gets both
// clusters' endpoints of a global host; when MeshConfig makes the host
// cluster-local, the push of model.MeshServiceSettingsKey leaves it its
// own cluster's endpoint alone.
func TestClusterLocalPushed(t *testing.T) {
	st, svc := translatetest.SpreadStore()
	mesh := translatetest.MeshWithClusterLocal()
	ts := startServer(t, st, withMesh(mesh))
	node := xdstest.GRPCNode(xdstest.NodeOptions{ID: "b", Namespace: "default", Metadata: map[string]string{"CLUSTER_ID": "cluster-b"}})
	name := model.ClusterName(80, "", svc.Hostname)
	eds := openADS(t, dial(t, ts.addr), node)
	eds.Subscribe(resource.EndpointType, name)
	r := eds.Next()
	eds.ACK(r)
	if got := claAddrs(t, r)[name]; strings.Join(got, ",") != "10.0.0.1,10.1.0.1" {
		t.Fatalf("global host: got %v, want both clusters' endpoints", got)
	}
	mesh.Set(translatetest.MeshWithClusterLocal(svc.Hostname).Mesh())
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.MeshServiceSettingsKey}))
	if got := claAddrs(t, eds.Next())[name]; strings.Join(got, ",") != "10.1.0.1" {
		t.Fatalf("cluster-local host: got %v, want cluster-b's endpoint alone", got)
	}
}
