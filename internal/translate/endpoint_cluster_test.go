package translate

import (
	"slices"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
)

// TestClusterLocalEndpoints: a cluster-local host gives a client the
// endpoints of its own cluster only; a client without CLUSTER_ID is in
// the local cluster; any other host gives every client every cluster's
// endpoints, each labelled with its cluster as istiod labels them.
func TestClusterLocalEndpoints(t *testing.T) {
	const (
		localWL  = "10.0.0.1=spread;default;spread;;Kubernetes"
		remoteWL = "10.1.0.1=spread-v2-0;default;spread;v2;cluster-b"
	)
	st, svc := translatetest.SpreadStore()
	for _, tc := range []struct {
		desc         string
		clusterLocal []model.Hostname
		client       string // CLUSTER_ID
		want         string
	}{
		{desc: "global host, local client", client: "Kubernetes", want: localWL + "," + remoteWL},
		{desc: "global host, remote client", client: "cluster-b", want: localWL + "," + remoteWL},
		{desc: "cluster-local host, local client", clusterLocal: []model.Hostname{svc.Hostname}, client: "Kubernetes",
			want: "10.0.0.1"},
		{desc: "cluster-local host, client without CLUSTER_ID", clusterLocal: []model.Hostname{svc.Hostname},
			want: "10.0.0.1"},
		{desc: "cluster-local host, remote client", clusterLocal: []model.Hostname{svc.Hostname}, client: "cluster-b",
			want: remoteWL},
		{desc: "cluster-local by wildcard, remote client", clusterLocal: []model.Hostname{"*.default.svc.cluster.local"},
			client: "cluster-b", want: remoteWL},
		{desc: "cluster-local host, client of a third cluster", clusterLocal: []model.Hostname{svc.Hostname},
			client: "cluster-c", want: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m := generateWith(GeneratorOptions{Discovery: st, Mesh: translatetest.MeshWithClusterLocal(tc.clusterLocal...)})
			for _, grpc := range []bool{true, false} {
				c := Client{Namespace: "default", GRPC: grpc, ClusterID: tc.client}
				cla := m.endpoints(t, c, model.ClusterName(80, "", svc.Hostname))
				if err := Validate(cla); err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(translatetest.LBEndpoints(cla), ","); got != tc.want {
					t.Errorf("gRPC %v: got  %s\nwant %s", grpc, got, tc.want)
				}
			}
		})
	}
}

// TestWorkloadMetadata: the istio.workload string as istiod writes it
// (util.AppendLbEndpointMetadata).
func TestWorkloadMetadata(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ep   model.Endpoint
		want string
	}{
		{"a Deployment's Pod, canonical labels",
			model.Endpoint{Namespace: "ns", PodName: "web-6c8d9f-x2x9z", Labels: map[string]string{
				"pod-template-hash": "6c8d9f", "service.istio.io/canonical-name": "web-svc",
				"service.istio.io/canonical-revision": "r1", "app": "web", "version": "v1"}},
			"web;ns;web-svc;r1;c1"},
		{"app.kubernetes.io labels before app and version",
			model.Endpoint{Namespace: "ns", PodName: "p", Labels: map[string]string{
				"app.kubernetes.io/name": "n", "app.kubernetes.io/version": "2", "app": "a", "version": "1"}},
			"p;ns;n;2;c1"},
		{"no labels: the workload names itself, the revision is left out",
			model.Endpoint{Namespace: "ns", PodName: "solo"}, "solo;ns;solo;;c1"},
		{"a hash that is not in the name",
			model.Endpoint{Namespace: "ns", PodName: "db-0", Labels: map[string]string{"pod-template-hash": "abc"}},
			"db-0;ns;db-0;;c1"},
	} {
		if got := workloadMetadata(&tc.ep, "c1"); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestClusterLocalDeps: every endpoint assignment depends on the mesh's
// serviceSettings (a change can make any host cluster-local), and only a
// cluster-local host's varies by the client's cluster.
func TestClusterLocalDeps(t *testing.T) {
	st, svc := translatetest.SpreadStore()
	for _, tc := range []struct {
		desc         string
		clusterLocal []model.Hostname
		vary         bool
	}{
		{"global", nil, false},
		{"cluster-local", []model.Hostname{svc.Hostname}, true},
	} {
		g := &endpointGenerator{GeneratorOptions{Discovery: st, Mesh: translatetest.MeshWithClusterLocal(tc.clusterLocal...)}}
		r := g.Generate(&Client{Namespace: "default", GRPC: true}, model.ClusterName(80, "", svc.Hostname))
		if !slices.Contains(r.Deps, model.MeshServiceSettingsKey) {
			t.Errorf("%s: deps %v lack %v", tc.desc, r.Deps, model.MeshServiceSettingsKey)
		}
		if got := r.Vary&VaryCluster != 0; got != tc.vary {
			t.Errorf("%s: varies by cluster: %v, want %v", tc.desc, got, tc.vary)
		}
	}
}
