package kubeconv

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// An endpoint's labels are its Pod's plus the locality's. The Pods of one
// workload (one ReplicaSet) carry equal labels, and in one zone get equal
// endpoint labels: they share one map, which each PodInfo remembers for
// its locality, so that rebuilding a service's endpoints allocates no map
// and ten replicas in three zones hold three maps, not ten.

// labelSet is one shared, immutable endpoint label map.
type labelSet struct{ labels map[string]string }

// endpointLabelSets finds the set of equal content. It holds sets
// weakly: a set lives while a PodInfo remembers it, and the endpoints
// built from it keep only its map, so the sets of deleted Pods go with
// them.
var endpointLabelSets = newWeakTable[labelSet]()

// endpointLabelSet returns the set of the endpoint labels of a Pod with
// podLabels in locality l (see mergeLabels), made if none lives; nil when
// there are none. The map is built only when the set is new: most Pods
// find their workload's.
func endpointLabelSet(podLabels map[string]string, l model.Locality) *labelSet {
	if len(podLabels) == 0 && l == (model.Locality{}) {
		return nil
	}
	var buf [256]byte
	key := appendLabelsKey(buf[:0], podLabels, l)
	return endpointLabelSets.get(key, func() *labelSet {
		return &labelSet{labels: mergeLabels(podLabels, l)}
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
// its last locality.
type podEndpointLabels struct {
	locality model.Locality
	set      *labelSet // nil: no labels
}

// endpointLabels returns the labels of an endpoint of p (which may be
// nil) in locality l; see mergeLabels. The map is shared: never modify
// it.
func endpointLabels(p *PodInfo, l model.Locality) map[string]string {
	if p == nil {
		return localityLabels.get(l)
	}
	if m := p.endpointLabels.Load(); m != nil && m.locality == l {
		return m.set.labelsOrNil()
	}
	set := endpointLabelSet(p.Labels, l)
	// Two workers may build one Pod's labels at once: either result is
	// right, and the last stored stays.
	p.endpointLabels.Store(&podEndpointLabels{locality: l, set: set})
	return set.labelsOrNil()
}

func (s *labelSet) labelsOrNil() map[string]string {
	if s == nil {
		return nil
	}
	return s.labels
}

// mergeLabels merges a Pod's labels with the locality labels, so that
// selectors written against topology labels match even when the locality
// came from the Node or the Pod's override label rather than the Pod. It
// returns a new map, nil when there is nothing to hold.
func mergeLabels(podLabels map[string]string, l model.Locality) map[string]string {
	if len(podLabels) == 0 && l == (model.Locality{}) {
		return nil
	}
	out := make(map[string]string, len(podLabels)+3)
	maps.Copy(out, podLabels)
	if l.Region != "" {
		out[corev1.LabelTopologyRegion] = l.Region
	}
	if l.Zone != "" {
		out[corev1.LabelTopologyZone] = l.Zone
	}
	if l.Subzone != "" {
		out[subzoneNodeLabel] = l.Subzone
	}
	return out
}

// localityLabels holds the endpoint labels of endpoints without a Pod (a
// selector-less Service's hand-written slices, a Pod not cached yet): the
// locality's labels alone, one map per locality. It holds them strongly,
// unlike endpointLabelSets, because nothing else would keep them alive
// and a cluster has few localities; past maxLocalityLabels (localities
// no real cluster has) a map is made per call, as before.
var localityLabels = &localityLabelMaps{maps: map[model.Locality]map[string]string{}}

const maxLocalityLabels = 4096

type localityLabelMaps struct {
	mu   sync.Mutex // guards maps
	maps map[model.Locality]map[string]string
}

// get returns the shared, immutable labels of locality l; nil for none.
func (t *localityLabelMaps) get(l model.Locality) map[string]string {
	if l == (model.Locality{}) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.maps[l]; ok {
		return m
	}
	m := mergeLabels(nil, l)
	if len(t.maps) < maxLocalityLabels {
		t.maps[l] = m
	}
	return m
}
