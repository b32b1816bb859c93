package crd

import (
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
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

	PeerAuthentications() []*securityv1.PeerAuthentication
	AuthorizationPolicies() []*securityv1.AuthorizationPolicy

	PeerAuthentication(namespace, name string) *securityv1.PeerAuthentication
	AuthorizationPolicy(namespace, name string) *securityv1.AuthorizationPolicy

	AppendEventHandler(EventHandler)
}

var _ Store = (*Registry)(nil)

// Locator is what a Store offers when its objects come from files (a
// folder's manifests): where each object was read, so that a report on
// it (configstatus.Ref.Where) leads to the line to fix.
type Locator interface {
	// Where returns "<file>:<line> (document <n>)" for an object the
	// store holds, else "".
	Where(kind Kind, namespace, name string) string
}

// Ref names an object of store for its status, with where it was read
// when the store is a Locator.
func Ref(store Store, kind Kind, namespace, name string) configstatus.Ref {
	ref := configstatus.Ref{Kind: string(kind), Namespace: namespace, Name: name}
	if l, ok := store.(Locator); ok {
		ref.Where = l.Where(kind, namespace, name)
	}
	return ref
}
