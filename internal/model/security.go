package model

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Who may call a gRPC server, as Istio's security.istio.io kinds say it:
// PeerAuthentication decides the transport a server's port requires
// (mutual TLS or plaintext), AuthorizationPolicy which callers and calls
// it lets through. Both apply to the workloads they select: every
// workload of their namespace without a selector (every workload of the
// mesh in the root namespace), the workloads whose labels match their
// selector, or (AuthorizationPolicy's targetRefs) the workloads behind
// the Services they name.

// MTLSMode is a PeerAuthentication's mutual TLS mode.
type MTLSMode uint8

const (
	// MTLSUnset inherits the mode of the level above (workload from
	// namespace, namespace from mesh, mesh from Istio's default,
	// PERMISSIVE).
	MTLSUnset MTLSMode = iota
	// MTLSDisable serves plaintext.
	MTLSDisable
	// MTLSPermissive accepts plaintext and mutual TLS.
	MTLSPermissive
	// MTLSStrict requires mutual TLS with a certificate of the mesh.
	MTLSStrict
)

func (m MTLSMode) String() string {
	switch m {
	case MTLSDisable:
		return "DISABLE"
	case MTLSPermissive:
		return "PERMISSIVE"
	case MTLSStrict:
		return "STRICT"
	}
	return "UNSET"
}

// PeerAuthentication is a converted security.istio.io PeerAuthentication.
// It is immutable once indexed.
type PeerAuthentication struct {
	Namespace, Name string
	// Created orders policies of one level: the oldest wins, as in Istio.
	Created time.Time
	// Selector, when not empty, limits the policy to the workloads of its
	// namespace whose labels match it (Istio ignores a policy with a
	// selector in the root namespace). Empty: the namespace's policy, or
	// the mesh's in the root namespace.
	Selector Labels
	Mode     MTLSMode
	// PortModes are portLevelMtls, by the workload's port (the port the
	// server listens on); Istio honours them only on a policy with a
	// selector.
	PortModes map[uint32]MTLSMode
}

// AuthzAction is an AuthorizationPolicy's action.
type AuthzAction uint8

const (
	AuthzAllow AuthzAction = iota
	AuthzDeny
	AuthzAudit
	// AuthzCustom delegates to an external authorizer, which gRPC servers
	// cannot call.
	AuthzCustom
)

func (a AuthzAction) String() string {
	switch a {
	case AuthzDeny:
		return "DENY"
	case AuthzAudit:
		return "AUDIT"
	case AuthzCustom:
		return "CUSTOM"
	}
	return "ALLOW"
}

// AuthorizationPolicy is a converted security.istio.io
// AuthorizationPolicy. It is immutable once indexed.
type AuthorizationPolicy struct {
	Namespace, Name string
	Created         time.Time
	// Selector, when not empty, limits the policy to the workloads whose
	// labels match it: of its namespace, or of every namespace for a
	// policy of the root namespace.
	Selector Labels
	// TargetServices, when not empty, are the names of the Services of
	// the policy's namespace (targetRefs of kind Service) whose workloads
	// the policy applies to; Selector is then empty.
	TargetServices []string
	Action         AuthzAction
	// Rules are the policy's rules, in order. None: the policy matches
	// nothing (an ALLOW policy with an empty spec denies every call, as
	// in Istio); a rule with no from, to or when matches every call.
	Rules []AuthzRule
}

// AuthzRule is one rule of an AuthorizationPolicy: it matches a call
// when one of From, one of To and every When match (an empty list
// matching anything).
type AuthzRule struct {
	From []AuthzSource
	To   []AuthzOperation
	When []AuthzCondition
}

// AuthzSource is a rule's from[].source: every non-empty field must
// match.
type AuthzSource struct {
	Principals, NotPrincipals               []string
	RequestPrincipals, NotRequestPrincipals []string
	Namespaces, NotNamespaces               []string
	IPBlocks, NotIPBlocks                   []string
	RemoteIPBlocks, NotRemoteIPBlocks       []string
	// ServiceAccounts are "<sa>" (of the policy's namespace) or
	// "<ns>/<sa>"; TrustDomains the trust domains of the caller's
	// identity ("*" wildcards at either end).
	ServiceAccounts, NotServiceAccounts []string
	TrustDomains, NotTrustDomains       []string
}

// AuthzOperation is a rule's to[].operation: every non-empty field must
// match.
type AuthzOperation struct {
	Hosts, NotHosts     []string
	Ports, NotPorts     []string
	Methods, NotMethods []string
	Paths, NotPaths     []string
}

// AuthzCondition is one of a rule's when conditions: Key matches one of
// Values (when given) and none of NotValues.
type AuthzCondition struct {
	Key               string
	Values, NotValues []string
}

// SecurityPolicies are the security policies that may apply to the
// workloads of one namespace: those of the namespace and of the root
// namespace, each list ordered oldest first, then by namespace and name.
// Which of them apply to a workload is decided by its labels and
// services (AppliesTo).
type SecurityPolicies struct {
	RootNamespace string
	Peer          []*PeerAuthentication
	Authz         []*AuthorizationPolicy
}

// SecurityIndex answers which security policies may apply to the
// workloads of a namespace. It is safe for concurrent use; what it
// returns is immutable. A change to a policy is reported with the keys
// SecurityKeys gives for its old and new versions.
type SecurityIndex interface {
	SecurityPoliciesFor(ns string) SecurityPolicies
}

// KindSecurity is the set of security policies (PeerAuthentications and
// AuthorizationPolicies) that select some workloads, named so that a
// policy's change wakes only what reads the workloads it selects:
// "<ns>" the namespace-wide policies of ns, "<ns>/label/<k>=<v>" those
// of ns whose selector holds that label (one label of the selector is
// enough to find every workload it can match), "<ns>/service/<name>"
// those of ns that target a Service.
const KindSecurity KeyKind = KindServiceAccounts + 1

// SecurityNamespaceKey is the key of ns's policies without a selector.
func SecurityNamespaceKey(ns string) ConfigKey { return ConfigKey{Kind: KindSecurity, Name: ns} }

// SecurityLabelKey is the key of ns's policies whose selector holds
// label k=v.
func SecurityLabelKey(ns, k, v string) ConfigKey {
	return ConfigKey{Kind: KindSecurity, Name: ns + "/label/" + k + "=" + v}
}

// SecurityServiceKey is the key of ns's policies that target the Service
// ns/name.
func SecurityServiceKey(ns, name string) ConfigKey {
	return ConfigKey{Kind: KindSecurity, Name: ns + "/service/" + name}
}

// securityKeys are the keys of a policy of namespace ns with selector
// and target services: what must be woken when it changes.
func securityKeys(ns string, selector Labels, services []string) []ConfigKey {
	if len(services) > 0 {
		keys := make([]ConfigKey, 0, len(services))
		for _, s := range services {
			keys = append(keys, SecurityServiceKey(ns, s))
		}
		return keys
	}
	if len(selector) == 0 {
		return []ConfigKey{SecurityNamespaceKey(ns)}
	}
	// A workload the selector matches carries every label of it; the
	// smallest key is one as good as any, and stable.
	k := slices.Min(mapKeys(selector))
	return []ConfigKey{SecurityLabelKey(ns, k, selector[k])}
}

func mapKeys(m Labels) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Keys are what a change of the policy touches.
func (p *PeerAuthentication) Keys() []ConfigKey {
	return securityKeys(p.Namespace, p.Selector, nil)
}

// Keys are what a change of the policy touches.
func (p *AuthorizationPolicy) Keys() []ConfigKey {
	return securityKeys(p.Namespace, p.Selector, p.TargetServices)
}

// AppendWorkloadSecurityKeys appends the keys of every policy that could
// apply to a workload of namespace ns with labels, behind the Services
// services of ns: what reads the workload's policies depends on them
// (and on the root namespace, MeshRootNamespaceKey).
func AppendWorkloadSecurityKeys(deps []ConfigKey, ns, root string, labels map[string]string, services []string) []ConfigKey {
	for _, n := range []string{ns, root} {
		deps = append(deps, SecurityNamespaceKey(n))
		for k, v := range labels {
			deps = append(deps, SecurityLabelKey(n, k, v))
		}
		if n == root && root == ns {
			break
		}
	}
	for _, s := range services {
		deps = append(deps, SecurityServiceKey(ns, s))
	}
	return deps
}

// policyApplies reports whether a policy of namespace ns with selector and
// target services applies to a workload of namespace wns with labels,
// behind services (names of Services of wns), given the root namespace.
func policyApplies(ns string, selector Labels, targets []string, root, wns string, labels map[string]string, services []string) bool {
	if ns != wns && ns != root {
		return false
	}
	if len(targets) > 0 {
		if ns != wns {
			return false
		}
		for _, t := range targets {
			if slices.Contains(services, t) {
				return true
			}
		}
		return false
	}
	return selector.Matches(labels)
}

// AppliesTo reports whether the policy applies to a workload of
// namespace ns with labels, given the root namespace.
func (p *PeerAuthentication) AppliesTo(root, ns string, labels map[string]string) bool {
	if len(p.Selector) > 0 && p.Namespace == root && ns != root {
		return false // Istio ignores a selector in the root namespace
	}
	return policyApplies(p.Namespace, p.Selector, nil, root, ns, labels, nil)
}

// AppliesTo reports whether the policy applies to a workload of
// namespace ns with labels behind services, given the root namespace.
func (p *AuthorizationPolicy) AppliesTo(root, ns string, labels map[string]string, services []string) bool {
	return policyApplies(p.Namespace, p.Selector, p.TargetServices, root, ns, labels, services)
}

// ComparePolicies orders policies oldest first, then by namespace and
// name, as Istio does.
func ComparePolicies(aCreated time.Time, aNS, aName string, bCreated time.Time, bNS, bName string) int {
	return cmp.Or(aCreated.Compare(bCreated), strings.Compare(aNS, bNS), strings.Compare(aName, bName))
}

// MTLSFor resolves the mutual TLS mode of a workload of namespace ns
// with labels on port, as Istio's ComposePeerAuthentication does: the
// oldest policy of each level (the mesh's: the root namespace's without
// a selector; the namespace's; the workload's: one of its namespace with
// a selector that matches), each level's mode replacing the one above
// unless UNSET, then the workload policy's portLevelMtls for port (UNSET
// there inheriting the workload's mode). Without any policy the mode is
// PERMISSIVE; found reports whether some policy applied.
func MTLSFor(p SecurityPolicies, ns string, labels map[string]string, port uint32) (mode MTLSMode, found bool) {
	var mesh, namespace, workload *PeerAuthentication
	oldest := func(cur, cand *PeerAuthentication) *PeerAuthentication {
		if cur == nil || ComparePolicies(cand.Created, cand.Namespace, cand.Name, cur.Created, cur.Namespace, cur.Name) < 0 {
			return cand
		}
		return cur
	}
	for _, pa := range p.Peer {
		if !pa.AppliesTo(p.RootNamespace, ns, labels) {
			continue
		}
		switch {
		case len(pa.Selector) == 0 && pa.Namespace == p.RootNamespace:
			mesh = oldest(mesh, pa)
		case len(pa.Selector) == 0:
			namespace = oldest(namespace, pa)
		case pa.Namespace != p.RootNamespace:
			workload = oldest(workload, pa)
		}
	}
	mode = MTLSPermissive
	for _, level := range []*PeerAuthentication{mesh, namespace, workload} {
		if level != nil {
			found = true
			if level.Mode != MTLSUnset {
				mode = level.Mode
			}
		}
	}
	if workload != nil {
		if m, ok := workload.PortModes[port]; ok && m != MTLSUnset {
			mode = m
		}
	}
	return mode, found
}

// AuthorizationPoliciesFor returns the authorization policies that apply
// to a workload of namespace ns with labels behind services, in p's
// order.
func AuthorizationPoliciesFor(p SecurityPolicies, ns string, labels map[string]string, services []string) []*AuthorizationPolicy {
	var out []*AuthorizationPolicy
	for _, ap := range p.Authz {
		if ap.AppliesTo(p.RootNamespace, ns, labels, services) {
			out = append(out, ap)
		}
	}
	return out
}
