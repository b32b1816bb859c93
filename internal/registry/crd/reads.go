package crd

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

// The reads below return objects from the informer caches. They are
// shared with the caches and with every other reader: never modify one
// (DeepCopy it first). A list is a new slice each call, ordered by
// namespace and name, so it can be kept as a snapshot of that moment.

// DestinationRules lists every DestinationRule in scope.
func (r *Registry) DestinationRules() []*networkingv1.DestinationRule {
	return list[*networkingv1.DestinationRule](r, DestinationRule)
}

// VirtualServices lists every VirtualService in scope.
func (r *Registry) VirtualServices() []*networkingv1.VirtualService {
	return list[*networkingv1.VirtualService](r, VirtualService)
}

// ServiceEntries lists every ServiceEntry in scope.
func (r *Registry) ServiceEntries() []*networkingv1.ServiceEntry {
	return list[*networkingv1.ServiceEntry](r, ServiceEntry)
}

// WorkloadEntries lists every WorkloadEntry in scope.
func (r *Registry) WorkloadEntries() []*networkingv1.WorkloadEntry {
	return list[*networkingv1.WorkloadEntry](r, WorkloadEntry)
}

// DestinationRule returns one DestinationRule, or nil.
func (r *Registry) DestinationRule(namespace, name string) *networkingv1.DestinationRule {
	return get[*networkingv1.DestinationRule](r, DestinationRule, namespace, name)
}

// VirtualService returns one VirtualService, or nil.
func (r *Registry) VirtualService(namespace, name string) *networkingv1.VirtualService {
	return get[*networkingv1.VirtualService](r, VirtualService, namespace, name)
}

// ServiceEntry returns one ServiceEntry, or nil.
func (r *Registry) ServiceEntry(namespace, name string) *networkingv1.ServiceEntry {
	return get[*networkingv1.ServiceEntry](r, ServiceEntry, namespace, name)
}

// WorkloadEntry returns one WorkloadEntry, or nil.
func (r *Registry) WorkloadEntry(namespace, name string) *networkingv1.WorkloadEntry {
	return get[*networkingv1.WorkloadEntry](r, WorkloadEntry, namespace, name)
}

// PeerAuthentications lists every PeerAuthentication in scope.
func (r *Registry) PeerAuthentications() []*securityv1.PeerAuthentication {
	return list[*securityv1.PeerAuthentication](r, PeerAuthentication)
}

// AuthorizationPolicies lists every AuthorizationPolicy in scope.
func (r *Registry) AuthorizationPolicies() []*securityv1.AuthorizationPolicy {
	return list[*securityv1.AuthorizationPolicy](r, AuthorizationPolicy)
}

// PeerAuthentication returns one PeerAuthentication, or nil.
func (r *Registry) PeerAuthentication(namespace, name string) *securityv1.PeerAuthentication {
	return get[*securityv1.PeerAuthentication](r, PeerAuthentication, namespace, name)
}

// AuthorizationPolicy returns one AuthorizationPolicy, or nil.
func (r *Registry) AuthorizationPolicy(namespace, name string) *securityv1.AuthorizationPolicy {
	return get[*securityv1.AuthorizationPolicy](r, AuthorizationPolicy, namespace, name)
}

func list[T metav1.Object](r *Registry, k Kind) []T {
	var out []T
	for _, inf := range r.informers(k) {
		for _, obj := range inf.GetStore().List() {
			if t, ok := obj.(T); ok {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b T) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

func get[T metav1.Object](r *Registry, k Kind, namespace, name string) T {
	var zero T
	// With Options.Namespaces there is one informer per namespace; at
	// most one holds the key.
	for _, inf := range r.informers(k) {
		obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
		if err == nil && exists {
			if t, ok := obj.(T); ok {
				return t
			}
		}
	}
	return zero
}
