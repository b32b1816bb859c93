package kubeconv

import (
	"maps"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// The replicas of one workload carry equal labels and equal owner
// references (their ReplicaSet), yet decoding gives each Pod its own map,
// slice and strings. Pods of equal labels and owners share one copy of
// both instead: 10 replicas hold one map and one slice, not 10.

// podMeta is one shared, immutable pair of a Pod's labels and owner
// references.
type podMeta struct {
	labels map[string]string
	owners []metav1.OwnerReference
}

// podMetas holds the shared pairs weakly: a pair lives while a PodInfo
// holds it, so that deleted workloads take theirs along.
var podMetas = newWeakTable[podMeta]()

// sharedPodMeta returns the pair equal to labels and owners, made if none
// lives; nil when both are empty. The copy is made only when the pair is
// new: most Pods find their workload's.
func sharedPodMeta(labels map[string]string, owners []metav1.OwnerReference) *podMeta {
	if len(labels) == 0 && len(owners) == 0 {
		return nil
	}
	var buf [512]byte
	key := appendOwnersKey(appendLabelsKey(buf[:0], labels, model.Locality{}), owners)
	return podMetas.get(key, func() *podMeta { return newPodMeta(labels, owners) })
}

// newPodMeta copies labels and owners, taking the strings that repeat
// across workloads (label keys, owner API versions and kinds) and the
// owners' booleans from the shared tables. Label values and owner names
// and UIDs are a workload's own: one copy per pair is all they cost.
func newPodMeta(labels map[string]string, owners []metav1.OwnerReference) *podMeta {
	m := &podMeta{}
	if len(labels) > 0 {
		m.labels = make(map[string]string, len(labels))
		for k, v := range maps.All(labels) {
			m.labels[names.str(k)] = v
		}
	}
	if len(owners) > 0 {
		m.owners = make([]metav1.OwnerReference, len(owners))
		for i, o := range owners {
			m.owners[i] = metav1.OwnerReference{
				APIVersion: names.str(o.APIVersion), Kind: names.str(o.Kind), Name: o.Name, UID: o.UID,
				Controller: boolPtr(o.Controller), BlockOwnerDeletion: boolPtr(o.BlockOwnerDeletion),
			}
		}
	}
	return m
}

// appendOwnersKey appends owner references to a labels key
// (appendLabelsKey), every field preceded by its length and each
// optional boolean as n (unset), 0 or 1, so that no two contents share
// one key.
func appendOwnersKey(b []byte, owners []metav1.OwnerReference) []byte {
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(len(owners)), 10)
	for _, o := range owners {
		b = appendKeyField(b, o.APIVersion)
		b = appendKeyField(b, o.Kind)
		b = appendKeyField(b, o.Name)
		b = appendKeyField(b, string(o.UID))
		b = appendOptionalBool(b, o.Controller)
		b = appendOptionalBool(b, o.BlockOwnerDeletion)
	}
	return b
}

func appendOptionalBool(b []byte, p *bool) []byte {
	switch {
	case p == nil:
		return append(b, 'n')
	case *p:
		return append(b, '1')
	}
	return append(b, '0')
}

func (m *podMeta) labelsOrNil() map[string]string {
	if m == nil {
		return nil
	}
	return m.labels
}

func (m *podMeta) ownersOrNil() []metav1.OwnerReference {
	if m == nil {
		return nil
	}
	return m.owners
}
