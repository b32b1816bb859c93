package kubeconv

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// An endpoint's labels are its Pod's plus Istio's topology labels
// (Topology). The Pods of one workload (one ReplicaSet) carry equal
// labels, and on one Node (so in one zone) get equal endpoint labels:
// they share one map, which each PodInfo remembers for its topology, so
// that rebuilding a service's endpoints allocates no map and replicas on
// one Node hold one map. Istio labels every endpoint with its Node
// (kubernetes.io/hostname), so replicas on distinct Nodes cannot share.

// labelSet is one shared, immutable endpoint label map.
type labelSet struct{ labels map[string]string }

// endpointLabelSets finds the set of equal content. It holds sets
// weakly: a set lives while a PodInfo remembers it, and the endpoints
// built from it keep only its map, so the sets of deleted Pods go with
// them.
var endpointLabelSets = newWeakTable[labelSet]()

// endpointLabelSet returns the set of the endpoint labels of a Pod with
// podLabels in topology t (see AugmentLabels), made if none lives; nil
// when there are none. The map is built only when the set is new: most
// Pods find their workload's.
func endpointLabelSet(podLabels map[string]string, t Topology) *labelSet {
	if len(podLabels) == 0 && t == (Topology{}) {
		return nil
	}
	var buf [256]byte
	key := appendLabelsKey(buf[:0], podLabels, t.Locality)
	key = appendKeyField(key, t.Cluster)
	key = appendKeyField(key, t.Node)
	key = appendKeyField(key, t.Network)
	return endpointLabelSets.get(key, func() *labelSet {
		return &labelSet{labels: AugmentLabels(podLabels, t)}
	})
}

// appendLabelsKey writes a Pod's labels and a locality in a canonical
// form: sorted keys, every key and value preceded by its length, so that
// no two contents share one. Two Pods whose labels differ only by a
// topology label that the locality sets anyway get two sets: no harm.
func appendLabelsKey(b []byte, podLabels map[string]string, l model.Locality) []byte {
	var arr [16]string
	keys := arr[:0]
	for k := range podLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendKeyField(b, k)
		b = appendKeyField(b, podLabels[k])
	}
	b = append(b, '|')
	b = appendKeyField(b, l.Region)
	b = appendKeyField(b, l.Zone)
	return appendKeyField(b, l.Subzone)
}

func appendKeyField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// podEndpointLabels is what a PodInfo remembers: the endpoint labels of
// its last topology.
type podEndpointLabels struct {
	topology Topology
	set      *labelSet // nil: no labels
}

// endpointLabels returns the labels of an endpoint of p (which may be
// nil) in topology t; see AugmentLabels. The map is shared: never modify
// it.
func endpointLabels(p *PodInfo, t Topology) map[string]string {
	if p == nil {
		return topologyLabels.get(t)
	}
	if m := p.endpointLabels.Load(); m != nil && m.topology == t {
		return m.set.labelsOrNil()
	}
	set := endpointLabelSet(p.Labels, t)
	// Two workers may build one Pod's labels at once: either result is
	// right, and the last stored stays.
	p.endpointLabels.Store(&podEndpointLabels{topology: t, set: set})
	return set.labelsOrNil()
}

func (s *labelSet) labelsOrNil() map[string]string {
	if s == nil {
		return nil
	}
	return s.labels
}

// Istio's topology labels that are not Kubernetes' own.
const (
	// ClusterLabel names the cluster of an endpoint.
	ClusterLabel = "topology.istio.io/cluster"
	// NetworkLabel names the network of an endpoint.
	NetworkLabel = "topology.istio.io/network"
)

// Topology is where an endpoint runs, as Istio writes it into the
// endpoint's labels (AugmentLabels).
type Topology struct {
	Locality model.Locality
	// Cluster is the ID of the endpoint's cluster; Node the Kubernetes
	// Node of a Pod; Network the endpoint's network.
	Cluster, Node, Network string
}

// AugmentLabels returns a workload's labels with its topology's, as
// Istio's AugmentLabels writes them: the locality's region, zone and
// subzone (topology.kubernetes.io/region, topology.kubernetes.io/zone,
// topology.istio.io/subzone), the cluster (topology.istio.io/cluster),
// the Node (kubernetes.io/hostname) replace the workload's own; the
// network (topology.istio.io/network) only where the workload says none.
// So a subset's or a selector's topology labels match wherever the
// locality came from (the Node, the Pod's override label). It returns a
// new map, nil when there is nothing to hold.
func AugmentLabels(labels map[string]string, t Topology) map[string]string {
	if len(labels) == 0 && t == (Topology{}) {
		return nil
	}
	out := make(map[string]string, len(labels)+6)
	maps.Copy(out, labels)
	for _, l := range []struct{ key, value string }{
		{corev1.LabelTopologyRegion, t.Locality.Region},
		{corev1.LabelTopologyZone, t.Locality.Zone},
		{subzoneNodeLabel, t.Locality.Subzone},
		{ClusterLabel, t.Cluster},
		{corev1.LabelHostname, t.Node},
	} {
		if l.value != "" {
			out[l.key] = l.value
		}
	}
	if t.Network != "" && out[NetworkLabel] == "" {
		out[NetworkLabel] = t.Network
	}
	return out
}

// topologyLabels holds the endpoint labels of endpoints without a Pod (a
// selector-less Service's hand-written slices, a Pod not cached yet): the
// topology's labels alone, one map per topology. It holds them strongly,
// unlike endpointLabelSets, because nothing else would keep them alive
// and a cluster has few Nodes and localities; past maxTopologyLabels
// (more than any real cluster has) a map is made per call.
var topologyLabels = &topologyLabelMaps{maps: map[Topology]map[string]string{}}

const maxTopologyLabels = 1 << 14

type topologyLabelMaps struct {
	mu   sync.Mutex // guards maps
	maps map[Topology]map[string]string
}

// get returns the shared, immutable labels of topology t; nil for none.
func (m *topologyLabelMaps) get(t Topology) map[string]string {
	if t == (Topology{}) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.maps[t]; ok {
		return l
	}
	l := AugmentLabels(nil, t)
	if len(m.maps) < maxTopologyLabels {
		m.maps[t] = l
	}
	return l
}
