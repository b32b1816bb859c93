package crd

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// handler turns a kind's informer events into keys on the work queue:
// informer goroutines must not wait on event handlers.
func (r *Registry) handler(kind Kind) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			// The watch missed the delete; the tombstone's key names the
			// object even when its last state is unknown.
			ns, name, err := cache.SplitMetaNamespaceKey(tomb.Key)
			if err == nil {
				r.queue.Add(Event{Kind: kind, Namespace: ns, Name: name})
			}
			return
		}
		if o, ok := obj.(metav1.Object); ok {
			r.queue.Add(Event{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			if unchanged(oldObj, newObj) {
				return
			}
			enqueue(newObj)
		},
		DeleteFunc: enqueue,
	}
}

// unchanged reports whether an update cannot matter to a reader: the same
// resourceVersion (a relist, after 410 Gone or a reconnect, replays every
// object as an update), or a write of status alone. The four kinds have a
// status subresource, so the API server raises metadata.generation on
// every spec change and never on a status write; labels and annotations
// do not raise it, so they are compared too. istiod writes status to
// these objects when it runs in the same cluster.
func unchanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return false
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return true
	}
	return o.GetGeneration() != 0 && o.GetGeneration() == n.GetGeneration() &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) &&
		maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}
