package kube

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The transforms below are meant for informers' SetTransform. Informers
// cache every object of a kind for the life of the process, and Pods and
// Nodes are the largest and most numerous objects we watch, while we read
// only a handful of their fields. Each transform is idempotent, because the
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

// StripManagedFields drops managedFields and the
// kubectl.kubernetes.io/last-applied-configuration annotation from any
// metav1.Object: both are often larger than the rest of the object and are
// never read here. The object is modified in place, which informers allow
// for transforms since client-go 1.27; the annotation map is replaced, not
// edited, in case it is shared.
func StripManagedFields(obj any) (any, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	// A nil pointer inside the interface would panic on the first setter.
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.IsNil() {
		return obj, nil
	}
	o.SetManagedFields(nil)
	if ann := o.GetAnnotations(); ann != nil {
		if _, found := ann[corev1.LastAppliedConfigAnnotation]; found {
			kept := make(map[string]string, len(ann)-1)
			for k, v := range ann {
				if k != corev1.LastAppliedConfigAnnotation {
					kept[k] = v
				}
			}
			if len(kept) == 0 {
				kept = nil
			}
			o.SetAnnotations(kept)
		}
	}
	return obj, nil
}
