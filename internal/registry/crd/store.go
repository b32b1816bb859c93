package crd

import (
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

// Store is where the conversions of the Istio kinds read their objects:
// a cluster's informers (Registry) or the manifests of a folder. Reads
// return shared objects (never modify one) and lists are ordered by
// namespace and name. Events say only that an object may have changed;
// the handler reads its current state (nil: deleted). Handlers are
// appended before the store runs and called on one goroutine.
type Store interface {
	DestinationRules() []*networkingv1.DestinationRule
	VirtualServices() []*networkingv1.VirtualService
	ServiceEntries() []*networkingv1.ServiceEntry
	WorkloadEntries() []*networkingv1.WorkloadEntry

	DestinationRule(namespace, name string) *networkingv1.DestinationRule
	VirtualService(namespace, name string) *networkingv1.VirtualService
	ServiceEntry(namespace, name string) *networkingv1.ServiceEntry
	WorkloadEntry(namespace, name string) *networkingv1.WorkloadEntry

	AppendEventHandler(EventHandler)
}

var _ Store = (*Registry)(nil)
