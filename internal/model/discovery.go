package model

import (
	"context"
	"time"
)

// ServiceDiscovery answers questions about the services a registry knows.
// Implementations are safe for concurrent use; what they return is
// immutable and may be kept.
type ServiceDiscovery interface {
	// Services lists every service, ordered by hostname.
	Services() []*Service
	// GetService returns the service with that hostname, or nil.
	GetService(hostname Hostname) *Service
	// Endpoints returns the endpoints that serve the service port a
	// number means (Service.PortByNumber) and whose labels match selector
	// (nil: all), in a stable order.
	Endpoints(hostname Hostname, port int32, selector Labels) []*Endpoint
	// EndpointsByPortName is Endpoints for the service port with that
	// name: a port number may name two ports (see Service.PortByNumber),
	// a name only one.
	EndpointsByPortName(hostname Hostname, portName string, selector Labels) []*Endpoint
}

// WorkloadLookup finds the workload behind an address, for what depends
// on the client rather than the service (its node, its locality). It is
// apart from ServiceDiscovery because only registries that know workloads
// implement it: the Kubernetes registry (Pods from its informers), the
// file registry (Pods of its folder) and the aggregate (the first of its
// sources that knows the address); a model.Store does not. It is safe for
// concurrent use.
type WorkloadLookup interface {
	// WorkloadByIP returns the workload that holds the IP, or nil.
	WorkloadByIP(ip string) *Workload
}

// Inventory says which namespaces, Kubernetes nodes and clusters exist,
// so that what a client says about itself can be checked against them:
// the xDS server serves a client naming a namespace, node or cluster that
// does not exist as one naming none, so that made-up names cannot each
// make resources of their own. The Kubernetes registry (its informers'
// Namespaces and Nodes), the file registry (its folder's) and the
// aggregate (any of its sources) implement it. Safe for concurrent use.
type Inventory interface {
	// HasNamespace reports whether the namespace exists.
	HasNamespace(name string) bool
	// HasNode reports whether the Kubernetes node exists, or holds a Pod.
	HasNode(name string) bool
	// HasCluster reports whether the registry reads that cluster (a
	// remote one: the local cluster is always known).
	HasCluster(id string) bool
}

// EventKind says what changed.
type EventKind int

const (
	// ServiceChanged: a service was added or its definition changed. Its
	// endpoints may have changed too.
	ServiceChanged EventKind = iota
	// EndpointsChanged: only the endpoints of the service changed.
	EndpointsChanged
	// ServiceDeleted: the service and its endpoints are gone.
	ServiceDeleted
	// ConfigChanged: the configuration part named by Event.Config changed
	// (the mesh settings, say); Hostname and Namespace are empty.
	ConfigChanged
)

func (k EventKind) String() string {
	switch k {
	case ServiceChanged:
		return "ServiceChanged"
	case EndpointsChanged:
		return "EndpointsChanged"
	case ServiceDeleted:
		return "ServiceDeleted"
	case ConfigChanged:
		return "ConfigChanged"
	}
	return "Unknown"
}

// Event tells a handler that something about one service, or one part of
// the configuration, changed.
type Event struct {
	Kind      EventKind
	Hostname  Hostname
	Namespace string
	// Config is the key that changed, for ConfigChanged.
	Config ConfigKey
	// Observed is when the source change behind the event reached
	// meshpilot (for Kubernetes, when the informer handler saw the
	// earliest of the events merged into this rebuild); zero when the
	// registry does not know, and then the event's own time stands for it.
	// Convergence metrics are measured from it.
	Observed time.Time
	// NoEndpoints: after this change the service has no endpoints. Always
	// so for ServiceDeleted; for EndpointsChanged the last ones went away
	// (an EndpointSlice deleted, a scale to zero). Clients fail their RPCs
	// to a service without endpoints, and such a change is often the
	// first half of a replace (kubectl replace --force, a Helm upgrade):
	// pushes hold it back for a while (push.Options.LeadingEdge).
	NoEndpoints bool
	// SameServiceAccounts: the identities of the service's endpoints
	// (Identity: their namespaces and service accounts) are what they
	// were before this change, so what reads them alone
	// (KindServiceAccounts: the SPIFFE names a client verifies) stays as
	// it is. The zero value claims nothing: a source that does not
	// compare them leaves it false, and the identities count as changed.
	SameServiceAccounts bool
}

// EventHandler receives change events. It is called from the registry's
// goroutines, after the change is visible through ServiceDiscovery, and
// must not block for long.
type EventHandler func(Event)

// Controller is a registry that runs: Run keeps a ServiceDiscovery
// current from a source (a Kubernetes cluster, a folder of manifests) and
// every change is reported to the event handlers once it is visible
// through ServiceDiscovery. The server serves nothing before HasSynced, so
// that clients never see a partial model.
//
// The registries (registry/kube, registry/file) implement it, and so do
// the aggregate of several (registry/aggregate) and a Store (an in-memory
// source for tests). A registry's model is written only by the registry:
// holders of a Controller read.
type Controller interface {
	ServiceDiscovery
	// AppendEventHandler adds a handler; call it before Run. Handlers may
	// be called concurrently, on the registry's goroutines.
	AppendEventHandler(EventHandler)
	// HasSynced reports whether the first complete model is built: every
	// object of the source has been read and converted.
	HasSynced() bool
	// Run reads the source, builds the first model, then keeps it current
	// until ctx ends, and returns once it has stopped. It is called once.
	// It returns an error when the source cannot be followed (the caches
	// cannot sync, the folder cannot be watched); the end of ctx is not
	// an error.
	Run(ctx context.Context) error
}
