package model

// ConfigKey names one part of the model that generated configuration is
// built from. Generators return the keys of what they read; a change
// reports the keys it touched; the xDS server regenerates and resends
// exactly what depends on a changed key. The server never derives keys
// from resource names: only generators know what a resource reads.
//
// A struct of comparable fields, so that it is a map key without
// allocation.
type ConfigKey struct {
	Kind KeyKind
	// Name identifies the part within its kind: the hostname for
	// KindService, KindEndpoints and KindServiceAccounts, the namespace
	// for KindNamespace.
	Name string
}

// KeyKind says what kind of model part a ConfigKey names.
type KeyKind uint8

const (
	// KindService is a service's definition: its existence, ports,
	// resolution, addresses and policies.
	KindService KeyKind = iota + 1
	// KindEndpoints is the set of a service's endpoints, with their
	// health, locality and labels. A change of the service's definition
	// changes this key too (a service change includes its endpoints, see
	// push.Request), so what reads both the definition and the endpoints
	// of a service depends on this key alone.
	KindEndpoints
	// KindNamespace is the set of services of a namespace: it changes
	// with every change of a service there, one created included. What is
	// decided by looking over a namespace's services (which of them hold a
	// gRPC server's address) depends on it: a service that does not exist
	// yet has no key of its own to depend on.
	KindNamespace
	// KindMeshConfig is a part of the mesh-wide settings (MeshSettings),
	// named by the MeshConfig field it holds (MeshRetryKey, ...).
	KindMeshConfig
	// KindDestinationRule is the set of rules (DestinationRules) for a
	// host, named by the host's FQDN.
	KindDestinationRule
	// KindVirtualService is the set of VirtualServices that route a host,
	// named by the host's FQDN.
	KindVirtualService
	// KindServiceAccounts is the set of identities (namespace and service
	// account) of a service's endpoints, named by the host's FQDN: what
	// verifies who a destination is (ISTIO_MUTUAL's SPIFFE names) reads
	// it rather than the endpoints, so that endpoints coming and going
	// under the same accounts regenerate none of it. Like KindEndpoints,
	// a change of the service's definition changes it too.
	KindServiceAccounts
)

func (k KeyKind) String() string {
	switch k {
	case KindService:
		return "Service"
	case KindEndpoints:
		return "Endpoints"
	case KindNamespace:
		return "Namespace"
	case KindMeshConfig:
		return "MeshConfig"
	case KindDestinationRule:
		return "DestinationRule"
	case KindVirtualService:
		return "VirtualService"
	case KindServiceAccounts:
		return "ServiceAccounts"
	case KindSecurity:
		return "Security"
	}
	return "Unknown"
}

// ServiceKey is the key of a service's definition.
func ServiceKey(h Hostname) ConfigKey { return ConfigKey{Kind: KindService, Name: string(h)} }

// EndpointsKey is the key of a service's endpoints.
func EndpointsKey(h Hostname) ConfigKey { return ConfigKey{Kind: KindEndpoints, Name: string(h)} }

// ServiceAccountsKey is the key of the identities of a service's
// endpoints.
func ServiceAccountsKey(h Hostname) ConfigKey {
	return ConfigKey{Kind: KindServiceAccounts, Name: string(h)}
}

// NamespaceKey is the key of a namespace's set of services.
func NamespaceKey(ns string) ConfigKey { return ConfigKey{Kind: KindNamespace, Name: ns} }

func (k ConfigKey) String() string { return k.Kind.String() + "/" + k.Name }
