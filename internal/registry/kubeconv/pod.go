package kubeconv

import (
	"cmp"
	"iter"
	"maps"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// PodInfo is the part of a Pod that meshpilot reads. The Kubernetes
// registry's Pod informer caches PodInfo instead of corev1.Pod (its
// StripPod transform): a corev1.Pod struct takes 1.2 KiB before any of its
// contents, a PodInfo about 300 bytes, and a cluster has more Pods than
// anything else we watch.
//
// A PodInfo in a cache is shared: never modify one.
//
// Its metadata are fields of its own rather than an embedded
// metav1.ObjectMeta, whose 232 bytes are mostly fields a Pod's cache never
// fills; PodInfo is a metav1.Object through methods (objectmeta.go), as
// informers and listers need, and its JSON names them as a Pod's
// metadata would.
type PodInfo struct {
	Name              string                  `json:"name,omitempty"`
	Namespace         string                  `json:"namespace,omitempty"`
	UID               types.UID               `json:"uid,omitempty"`
	ResourceVersion   string                  `json:"resourceVersion,omitempty"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string       `json:"labels,omitempty"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences,omitempty"`

	NodeName       string
	ServiceAccount string
	// IPs holds status.podIPs (every IP family), or status.podIP alone
	// when the list is empty, as older servers and hand-written manifests
	// give it.
	IPs   []string
	Phase corev1.PodPhase
	// Ready is the status of the Ready condition.
	Ready bool

	// meta holds the shared Labels and OwnerReferences alive
	// (podmeta.go); nil when the Pod has neither.
	meta *podMeta
	// endpointLabels remembers the labels of the Pod's endpoints
	// (labelsets.go); not part of its content.
	endpointLabels atomic.Pointer[podEndpointLabels]
}

// NewPodInfo keeps what meshpilot reads of a Pod; nil gives nil. The
// result shares its label map and owner references with every Pod of
// equal ones (podmeta.go), the Pod's deletion timestamp, and one copy of
// its namespace, node and service account names with every other Pod's.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	if pod == nil {
		return nil
	}
	meta := sharedPodMeta(pod.Labels, pod.OwnerReferences)
	p := &PodInfo{
		Name:            pod.Name,
		Namespace:       names.str(pod.Namespace),
		UID:             pod.UID,
		Labels:          meta.labelsOrNil(),
		ResourceVersion: pod.ResourceVersion,
		OwnerReferences: meta.ownersOrNil(),
		// The Pod's own; nil for all but deleting Pods, so it costs a
		// pointer.
		DeletionTimestamp: pod.DeletionTimestamp,
		NodeName:          names.str(pod.Spec.NodeName),
		ServiceAccount:    names.str(pod.Spec.ServiceAccountName),
		Phase:             corev1.PodPhase(names.str(string(pod.Status.Phase))),
		meta:              meta,
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != "" {
			p.IPs = append(p.IPs, ip.IP)
		}
	}
	if len(p.IPs) == 0 && pod.Status.PodIP != "" {
		p.IPs = []string{pod.Status.PodIP}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status == corev1.ConditionTrue
			break
		}
	}
	return p
}

// GetObjectKind makes PodInfo a runtime.Object, which informer caches and
// listers expect; it carries no type information.
func (p *PodInfo) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject makes PodInfo a runtime.Object.
func (p *PodInfo) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	// The copy keeps meta, which only holds the shared originals alive,
	// and gets labels and owner references of its own to modify.
	out := &PodInfo{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp.DeepCopy(),
		Labels:            maps.Clone(p.Labels),
		NodeName:          p.NodeName, ServiceAccount: p.ServiceAccount, Phase: p.Phase, Ready: p.Ready, meta: p.meta,
	}
	if p.OwnerReferences != nil {
		out.OwnerReferences = make([]metav1.OwnerReference, len(p.OwnerReferences))
		for i := range p.OwnerReferences {
			p.OwnerReferences[i].DeepCopyInto(&out.OwnerReferences[i])
		}
	}
	out.IPs = append([]string(nil), p.IPs...)
	return out
}

// PodForIP picks, among the Pods that hold an IP (candidates, in any
// order; nil ones are skipped), the one that an address of an
// EndpointSlice in namespace belongs to when the slice names no Pod.
// Namespace "" accepts any namespace.
//
// Only a Pod of the slice's own namespace counts, as in Istio: a
// hostNetwork Pod has its node's IP, shared by every hostNetwork Pod on the
// node, whatever their namespaces. Only a running Pod not being deleted
// counts: a finished or terminating Pod may keep an IP that a new Pod
// already has. Readiness does not matter (Istio's pod cache wants Ready
// Pods too): the endpoint's own conditions say whether it takes traffic,
// and its labels, and so its subsets, should not come and go with each
// failed probe. Among several, the first by namespace and name, so that
// the choice is stable.
func PodForIP(namespace string, candidates iter.Seq[*PodInfo]) *PodInfo {
	var found *PodInfo
	for p := range candidates {
		if p == nil || p.Phase != corev1.PodRunning || p.DeletionTimestamp != nil ||
			(namespace != "" && p.Namespace != namespace) {
			continue
		}
		if found == nil || cmp.Or(cmp.Compare(p.Namespace, found.Namespace), cmp.Compare(p.Name, found.Name)) < 0 {
			found = p
		}
	}
	return found
}
