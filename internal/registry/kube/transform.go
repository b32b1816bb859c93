package kube

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The transforms below are meant for informers' SetTransform. Informers
// cache every object of a kind for the life of the process, and Pods,
// EndpointSlices, Services and Nodes are the largest and most numerous
// objects we watch, while we read only a handful of their fields. Each transform is idempotent, because the
// informer may hand it an object it has already transformed, and passes
// through anything that is not its type: tombstones
// (cache.DeletedFinalStateUnknown) carry an object that was transformed
// when it entered the cache.

// StripPod replaces a *corev1.Pod with a *kubeconv.PodInfo: name,
// namespace, uid, labels, resourceVersion, ownerReferences,
// deletionTimestamp, spec.nodeName, spec.serviceAccountName, the Pod's
// IPs, its phase and whether it is Ready. A new object is built, rather than the old one trimmed, so that
// nothing keeps the decoded original (containers, volumes, env, managed
// fields) reachable.
func StripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return obj, nil
	}
	return kubeconv.NewPodInfo(pod), nil
}

// StripNode replaces a *corev1.Node with a new Node that keeps only name,
// uid, labels and resourceVersion: a Node is read only for its topology
// labels, and its status (images, conditions, addresses) is large and
// changes every few seconds.
func StripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok || node == nil {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			UID:             node.UID,
			Labels:          node.Labels,
			ResourceVersion: node.ResourceVersion,
		},
	}, nil
}

// StripService replaces a *corev1.Service with a new one that keeps only
// what conversion reads (kubeconv.StrippedService): status, node ports,
// session affinity, load balancer settings and every annotation but
// networking.istio.io/exportTo go.
func StripService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc == nil {
		return obj, nil
	}
	return kubeconv.StrippedService(svc), nil
}

// StripEndpointSlice replaces a *discoveryv1.EndpointSlice with a new one
// that keeps only what conversion and the indexes read
// (kubeconv.StrippedEndpointSlice): hostnames, hints, most of each
// target reference and every label but kubernetes.io/service-name go,
// and the strings and conditions that repeat across endpoints are shared.
func StripEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s == nil {
		return obj, nil
	}
	return kubeconv.StrippedEndpointSlice(s), nil
}

// StripManagedFields is kubeconv.StripManagedFields, which the Istio
// registry's informers share.
var StripManagedFields = kubeconv.StripManagedFields
