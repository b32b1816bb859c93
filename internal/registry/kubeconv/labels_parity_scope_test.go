package kubeconv_test

import (
	"reflect"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// TestAugmentLabels: Istio's topology labels as its AugmentLabels writes
// them: the locality's, the cluster's and the Node's replace the
// workload's own; the network's only where the workload says none.
func TestAugmentLabels(t *testing.T) {
	full := kubeconv.Topology{Locality: model.Locality{Region: "r", Zone: "z", Subzone: "s"}, Cluster: "east", Node: "n1", Network: "net1"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		t      kubeconv.Topology
		want   map[string]string
	}{
		{"nothing", nil, kubeconv.Topology{}, nil},
		{"labels alone", map[string]string{"app": "a"}, kubeconv.Topology{}, map[string]string{"app": "a"}},
		{"every part", map[string]string{"app": "a"}, full, map[string]string{
			"app": "a", "topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z", "topology.istio.io/subzone": "s",
			"topology.istio.io/cluster": "east", "kubernetes.io/hostname": "n1", "topology.istio.io/network": "net1",
		}},
		{"the topology replaces the workload's own, but for the network", map[string]string{
			"topology.kubernetes.io/zone": "mine", "topology.istio.io/cluster": "mine", "kubernetes.io/hostname": "mine", "topology.istio.io/network": "mine",
		}, full, map[string]string{
			"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z", "topology.istio.io/subzone": "s",
			"topology.istio.io/cluster": "east", "kubernetes.io/hostname": "n1", "topology.istio.io/network": "mine",
		}},
		{"what is unknown is left out", nil, kubeconv.Topology{Cluster: "Kubernetes", Locality: model.Locality{Zone: "z"}},
			map[string]string{"topology.istio.io/cluster": "Kubernetes", "topology.kubernetes.io/zone": "z"}},
	} {
		if got := kubeconv.AugmentLabels(tc.labels, tc.t); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
