package model

import (
	"reflect"
	"slices"
	"time"
)

// DefaultTrustDomain is Istio's trust domain when MeshConfig sets none.
const DefaultTrustDomain = "cluster.local"

// DefaultRootNamespace is Istio's root namespace when MeshConfig sets
// none: rules there apply mesh-wide.
const DefaultRootNamespace = "istio-system"

// MeshSettings are the mesh-wide settings generators read (Istio's
// MeshConfig, the fields meshpilot honours). DefaultMeshSettings is
// Istio's default mesh. A MeshSettings is never changed once published: a
// change is a new one.
type MeshSettings struct {
	// DefaultHTTPRetry is the retry policy of a route without one of its
	// own; nil means Istio's default policy, Attempts 0 no retries.
	DefaultHTTPRetry *HTTPRetry
	// TrustDomain is the mesh's SPIFFE trust domain
	// (spiffe://<trust domain>/ns/<namespace>/sa/<service account>);
	// never empty once published (DefaultTrustDomain).
	TrustDomain string
	// TrustDomainAliases are other trust domains whose identities are
	// accepted as this one's (Istio's trust domain migration): a peer's
	// expected identities are its identity in TrustDomain and in each
	// alias, in this order.
	TrustDomainAliases []string
	// RootNamespace holds the rules (DestinationRules) that apply to the
	// whole mesh; "" leaves the choice to the reader (meshpilot: Istio's
	// DefaultRootNamespace).
	RootNamespace string
	// ServiceSettings are MeshConfig's serviceSettings, in order; see
	// ClusterLocalHosts.
	ServiceSettings []ServiceSettings
	// LocalityLB is localityLbSetting; nil is Istio's default (enabled,
	// nothing else set).
	LocalityLB *LocalityLB
	// DefaultExportTo are the exportTo of the objects that say none.
	DefaultExportTo ExportDefaults
}

// ExportDefaults are MeshConfig's defaultServiceExportTo,
// defaultVirtualServiceExportTo and defaultDestinationRuleExportTo, as
// written; nil is Istio's default, every namespace ("*").
type ExportDefaults struct {
	Service, VirtualService, DestinationRule []string
}

// DestinationRulesPrivate reports whether a DestinationRule that says no
// exportTo is exported to its own namespace alone: Istio reads only "."
// in defaultDestinationRuleExportTo, any other default exports it to all.
func (d ExportDefaults) DestinationRulesPrivate() bool {
	return slices.Contains(d.DestinationRule, ".")
}

// DefaultMeshSettings returns Istio's default mesh.
func DefaultMeshSettings() *MeshSettings {
	return &MeshSettings{TrustDomain: DefaultTrustDomain}
}

// HTTPRetry is a retry policy as Istio's HTTPRetry states it.
type HTTPRetry struct {
	// Attempts is the number of retries; 0 turns retries off.
	Attempts int32
	// RetryOn lists the conditions, comma separated (Envoy's names and
	// gRPC status names; integers are HTTP status codes). Empty keeps
	// the default's.
	RetryOn string
	// PerTryTimeout, when not zero, bounds each attempt.
	PerTryTimeout time.Duration
	// Backoff, when not zero, is the base interval between retries.
	Backoff time.Duration
	// RetryIgnorePreviousHosts, when set, says whether a retry avoids
	// the hosts already tried; unset keeps the default (it does).
	RetryIgnorePreviousHosts *bool
}

// MeshWatcher publishes the mesh settings in force. Mesh must be cheap
// and safe for concurrent use; a change is reported as one event of kind
// ConfigChanged per key of MeshKeys whose part changed.
type MeshWatcher interface {
	Mesh() *MeshSettings
}

// The mesh settings are split into parts by what reads them, each with a
// key of kind KindMeshConfig, so that a change regenerates only what
// reads the part that changed.
var (
	// MeshRetryKey is DefaultHTTPRetry: routes read it.
	MeshRetryKey = ConfigKey{Kind: KindMeshConfig, Name: "defaultHttpRetryPolicy"}
	// MeshTrustDomainKey is TrustDomain and TrustDomainAliases: clusters
	// read them (the identities a TLS peer must present), and so do gRPC
	// servers' listeners (the peers they let in, the principals of their
	// RBAC rules).
	MeshTrustDomainKey = ConfigKey{Kind: KindMeshConfig, Name: "trustDomain"}
	// MeshRootNamespaceKey is RootNamespace. The policy index reads it,
	// and reports the rules whose choice it changes; gRPC servers'
	// listeners, which the root namespace's security policies may
	// select, depend on it too.
	MeshRootNamespaceKey = ConfigKey{Kind: KindMeshConfig, Name: "rootNamespace"}
	// MeshServiceSettingsKey is ServiceSettings: which hosts are
	// cluster-local. Nothing reads it while meshpilot serves one cluster.
	MeshServiceSettingsKey = ConfigKey{Kind: KindMeshConfig, Name: "serviceSettings"}
	// MeshLocalityLBKey is LocalityLB: endpoint assignments read it.
	MeshLocalityLBKey = ConfigKey{Kind: KindMeshConfig, Name: "localityLbSetting"}
	// MeshExportToKey is DefaultExportTo. What reads the visibility of a
	// service reads it; the rule indexes follow it and report the hosts
	// whose choice it changes.
	MeshExportToKey = ConfigKey{Kind: KindMeshConfig, Name: "defaultExportTo"}
)

// meshParts says which fields of MeshSettings make up each part.
var meshParts = []struct {
	key   ConfigKey
	equal func(a, b *MeshSettings) bool
}{
	{MeshRetryKey, func(a, b *MeshSettings) bool { return reflect.DeepEqual(a.DefaultHTTPRetry, b.DefaultHTTPRetry) }},
	{MeshTrustDomainKey, func(a, b *MeshSettings) bool {
		return a.TrustDomain == b.TrustDomain && reflect.DeepEqual(a.TrustDomainAliases, b.TrustDomainAliases)
	}},
	{MeshRootNamespaceKey, func(a, b *MeshSettings) bool { return a.RootNamespace == b.RootNamespace }},
	{MeshServiceSettingsKey, func(a, b *MeshSettings) bool { return reflect.DeepEqual(a.ServiceSettings, b.ServiceSettings) }},
	{MeshLocalityLBKey, func(a, b *MeshSettings) bool { return reflect.DeepEqual(a.LocalityLB, b.LocalityLB) }},
	{MeshExportToKey, func(a, b *MeshSettings) bool { return reflect.DeepEqual(a.DefaultExportTo, b.DefaultExportTo) }},
}

// MeshKeys returns the keys of the parts of the settings that differ
// between a and b, in a fixed order; none when they are equal.
func MeshKeys(a, b *MeshSettings) []ConfigKey {
	var out []ConfigKey
	for _, p := range meshParts {
		if !p.equal(a, b) {
			out = append(out, p.key)
		}
	}
	return out
}
