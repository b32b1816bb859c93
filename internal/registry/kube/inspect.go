package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// What an audit of the registry (internal/audit) reads and does: the
// informer caches per kind, the model built afresh from a list, and a
// relist of one kind.

// Transform is what the informers apply to every object before caching
// it (Pods become *kubeconv.PodInfo, Nodes keep their labels, Services
// and EndpointSlices what conversion reads, managed fields go): applied
// to a listed object, it gives what the cache should hold. It is
// idempotent.
func Transform(obj any) (any, error) { return stripObject(obj) }

// Cached returns what the informer caches hold of kind (one of Kinds),
// over every watch scope, transformed as Transform does. The objects are
// the caches' own: never modify them.
func (c *Controller) Cached(kind string) []any {
	switch kind {
	case KindNode:
		return c.nodes.GetStore().List()
	case KindNamespace:
		return c.namespaces.GetStore().List()
	}
	var out []any
	for _, ns := range c.watchNamespaces {
		scope := c.scopes[ns]
		switch kind {
		case KindService:
			out = append(out, scope.services.GetStore().List()...)
		case KindEndpointSlice:
			out = append(out, scope.slices.GetStore().List()...)
		case KindPod:
			out = append(out, scope.pods.GetStore().List()...)
		}
	}
	return out
}

// Relist makes the informers of kind (one of Kinds) list it again, by
// ending their watches as an expired resourceVersion would (package
// relist):
// the informers then replay every object, their handlers rebuild the
// services whose objects changed, and objects gone from the API are
// deleted. It returns how many watches it ended; 0 when none was open
// (an informer between two watches lists anyway, or is not started).
func (c *Controller) Relist(kind string) (int, error) {
	r, ok := c.relisters[kind]
	if !ok {
		return 0, fmt.Errorf("kube registry: no informer for kind %q", kind)
	}
	return r.Relist(), nil
}

// Resync rebuilds the model's service for a Kubernetes Service from the
// caches, as an event of one of its objects would.
func (c *Controller) Resync(namespace, name string) {
	c.enqueue(serviceKey{namespace, name})
}

// ModelFrom builds, from scratch, the services and endpoints the
// registry would hold if its caches held objects (by kind, as listed:
// Transform is applied here): the same conversion (kubeconv), the same
// watch scope, the discovery selectors in force and the cluster ID. The
// objects are not modified, but the result may share maps with them.
func (c *Controller) ModelFrom(objects map[string][]any) (*model.Store, error) {
	idx := listIndexes()
	for kind, objs := range objects {
		if _, err := idx.store(kind); err != nil {
			return nil, err
		}
		for _, o := range objs {
			if kind != KindNamespace {
				// The transforms build new objects from these kinds;
				// the Namespaces' would strip the caller's objects in
				// place.
				var err error
				if o, err = stripObject(o); err != nil {
					return nil, err
				}
			}
			if err := idx.add(kind, o); err != nil {
				return nil, err
			}
		}
	}
	scope := idx.scopes[metav1.NamespaceAll]
	out := model.NewStore()
	for _, o := range scope.services.List() {
		svc := o.(*corev1.Service)
		if s, eps := c.build(idx, serviceKey{svc.Namespace, svc.Name}); s != nil {
			out.Update(s, eps)
		}
	}
	return out, nil
}
