package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodInfo is the part of a Pod that meshpilot reads. The Pod informer
// caches PodInfo instead of corev1.Pod (see StripPod): a corev1.Pod struct
// takes 1.2 KiB before any of its contents, a PodInfo about 300 bytes, and
// a cluster has more Pods than anything else we watch.
//
// A PodInfo in a cache is shared: never modify one.
type PodInfo struct {
	// ObjectMeta keeps name, namespace, uid, labels, resourceVersion and
	// owner references only.
	metav1.ObjectMeta
	NodeName       string
	ServiceAccount string
	// IPs holds status.podIPs (every IP family), or status.podIP alone
	// when the list is empty, as older servers and hand-written manifests
	// give it.
	IPs   []string
	Phase corev1.PodPhase
	// Ready is the status of the Ready condition.
	Ready bool
}

// NewPodInfo keeps what meshpilot reads of a Pod; nil gives nil. The
// result shares the Pod's label map and owner references.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	if pod == nil {
		return nil
	}
	p := &PodInfo{
		ObjectMeta: metav1.ObjectMeta{
			Name:            pod.Name,
			Namespace:       pod.Namespace,
			UID:             pod.UID,
			Labels:          pod.Labels,
			ResourceVersion: pod.ResourceVersion,
			OwnerReferences: pod.OwnerReferences,
		},
		NodeName:       pod.Spec.NodeName,
		ServiceAccount: pod.Spec.ServiceAccountName,
		Phase:          pod.Status.Phase,
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
	out := *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.IPs = append([]string(nil), p.IPs...)
	return &out
}
