package model

import (
	"slices"
	"strings"
	"time"
)

// DestinationRule is what a rule (Istio's DestinationRule) says about
// the traffic to one host, in the terms generators use: the subsets of
// its endpoints and the traffic policy of its clusters. A DestinationRule
// is never changed once published.
type DestinationRule struct {
	// Namespace and Name identify the object it came from.
	Namespace, Name string
	// Host is the FQDN it applies to, or a wildcard ("*.example.com",
	// "*"): then it applies to the hosts the wildcard matches that have
	// no rule of their own in its namespace (RulesFor).
	Host Hostname
	// Policy applies to every cluster of the host, unless a port's or a
	// subset's overrides it.
	Policy  *TrafficPolicy
	Subsets []Subset
	// ExportTo lists the namespaces whose clients see the rule, as Istio
	// writes them: "*" every namespace, "." the rule's own, "~" none;
	// empty means MeshConfig's defaultDestinationRuleExportTo.
	ExportTo []string
	// Created orders the rules of one namespace for one host, which
	// Istio merges oldest first (ConsolidateRules).
	Created time.Time
	// MergedFrom names the later rules of the namespace merged into this
	// one (ConsolidateRules), in order; empty for a rule as written.
	MergedFrom []string
}

// VisibleTo reports whether clients of namespace ns see the rule.
func (r *DestinationRule) VisibleTo(ns string) bool {
	return visibleTo(r.ExportTo, r.Namespace, ns)
}

// exportedToAll reports whether every client sees the rule.
func (r *DestinationRule) exportedToAll() bool { return exportedToAll(r.ExportTo) }

// Subset is a named part of a host's endpoints.
type Subset struct {
	Name string
	// Labels select the endpoints; nil selects every endpoint.
	Labels Labels
	// Policy, when not nil, overrides the rule's for this subset's
	// clusters, field by field as Istio merges them.
	Policy *TrafficPolicy
}

// LoadBalancer is a cluster's load balancing algorithm.
type LoadBalancer uint8

const (
	// LBDefault: none set (round robin).
	LBDefault LoadBalancer = iota
	LBRoundRobin
	LBLeastRequest
	LBRandom
)

// TrafficPolicy is the part of a rule's trafficPolicy meshpilot applies.
type TrafficPolicy struct {
	// LoadBalancer is loadBalancer.simple; ConsistentHash, when set,
	// is loadBalancer.consistentHash instead (one of the two is set).
	LoadBalancer   LoadBalancer
	ConsistentHash *ConsistentHash
	// MaxRequests is connectionPool.http.http2MaxRequests; 0: unset.
	MaxRequests int32
	// OutlierDetection, when set, is outlierDetection.
	OutlierDetection *OutlierDetection
	// TLS, when set, is tls: how to secure connections to the endpoints.
	TLS *ClientTLS
	// PortLevel holds the per-port policies, by port number; they replace
	// the top-level fields they set.
	PortLevel map[int32]*TrafficPolicy
}

// ConsistentHash is loadBalancer.consistentHash: requests with the same
// hash key go to the same endpoint. Exactly one key is set.
type ConsistentHash struct {
	// HeaderName hashes the value of a request header (httpHeaderName).
	HeaderName string
	// Cookie hashes an HTTP cookie (httpCookie).
	Cookie *HashCookie
	// SourceIP hashes the client's address (useSourceIp).
	SourceIP bool
	// QueryParameter hashes a query parameter (httpQueryParameterName).
	QueryParameter string
	// Maglev selects Maglev over a ring hash; MaglevTableSize is its
	// table size (0: the default).
	Maglev          bool
	MaglevTableSize uint64
	// MinimumRingSize is the ring hash's minimum ring size; 0 leaves
	// the client's default (1024 for Envoy and grpc-go).
	MinimumRingSize uint64
}

// OutlierDetection is outlierDetection: when to eject an endpoint from
// the load balancing pool for a while. A nil count is unset.
type OutlierDetection struct {
	// Consecutive5xx and ConsecutiveGateway are consecutive5xxErrors and
	// consecutiveGatewayErrors; 0 turns that check off.
	Consecutive5xx, ConsecutiveGateway *uint32
	// SplitLocalOrigin is splitExternalLocalOriginErrors, with
	// consecutiveLocalOriginFailures.
	SplitLocalOrigin       bool
	ConsecutiveLocalOrigin *uint32
	// FailurePercentage is failurePercentageThreshold: eject an endpoint
	// whose share of failed requests reaches it.
	FailurePercentage *uint32
	// Interval and BaseEjectionTime: 0 is unset.
	Interval, BaseEjectionTime time.Duration
	// MaxEjectionPercent: 0 is unset.
	MaxEjectionPercent uint32
}

// TLSMode is tls.mode.
type TLSMode uint8

const (
	// TLSDisable: plaintext (also the mode of an unset tls).
	TLSDisable TLSMode = iota
	// TLSSimple: TLS, verifying the server.
	TLSSimple
	// TLSMutual: TLS with a client certificate the rule names.
	TLSMutual
	// TLSIstioMutual: TLS with the workload's mesh certificate, verifying
	// the server's SPIFFE identity.
	TLSIstioMutual
)

// ClientTLS is a rule's tls: how a client secures its connections to the
// endpoints.
type ClientTLS struct {
	Mode TLSMode
	// CredentialName names where the certificates are (Istio: a Secret);
	// meshpilot gives it to gRPC clients as the name of a certificate
	// provider instance of their bootstrap.
	CredentialName string
	// ClientCertificate, PrivateKey and CACertificates are files on the
	// client.
	ClientCertificate, PrivateKey, CACertificates string
	// SubjectAltNames, when set, are the identities the server must
	// present (for ISTIO_MUTUAL, in place of the destination's SPIFFE
	// identities).
	SubjectAltNames []string
	// SNI is the server name to send.
	SNI string
	// InsecureSkipVerify skips verifying the server's certificate.
	InsecureSkipVerify bool
}

// HashCookie is the cookie a consistent hash reads (Envoy creates it
// when absent and TTL is set).
type HashCookie struct {
	Name, Path string
	TTL        time.Duration
}

// ForPort returns the policy in force on a port: the port's settings over
// the policy's own. Istio merges portLevelSettings over the top level
// field by field (loadBalancer, connectionPool, ...), which is what this
// does for the fields meshpilot reads.
func (p *TrafficPolicy) ForPort(port int32) TrafficPolicy {
	if p == nil {
		return TrafficPolicy{}
	}
	out := *p
	out.PortLevel = nil
	if pl := p.PortLevel[port]; pl != nil {
		out.overlay(pl)
	}
	return out
}

// overlay sets the fields o sets. loadBalancer is one field in Istio's
// merge: a simple algorithm over a consistent hash replaces it, and the
// other way round.
func (p *TrafficPolicy) overlay(o *TrafficPolicy) {
	if o.LoadBalancer != LBDefault || o.ConsistentHash != nil {
		p.LoadBalancer, p.ConsistentHash = o.LoadBalancer, o.ConsistentHash
	}
	if o.MaxRequests != 0 {
		p.MaxRequests = o.MaxRequests
	}
	if o.OutlierDetection != nil {
		p.OutlierDetection = o.OutlierDetection
	}
	if o.TLS != nil {
		p.TLS = o.TLS
	}
}

// PolicyFor returns the traffic policy of a cluster of the rule: the
// rule's policy for the port, then the subset's for the port over it
// (Istio's MergeTrafficPolicy). subset is "" for the whole host; a
// subset the rule does not define yields false.
func (r *DestinationRule) PolicyFor(port int32, subset string) (TrafficPolicy, bool) {
	if r == nil {
		return TrafficPolicy{}, subset == ""
	}
	out := r.Policy.ForPort(port)
	if subset == "" {
		return out, true
	}
	s := r.Subset(subset)
	if s == nil {
		return TrafficPolicy{}, false
	}
	if s.Policy != nil {
		sp := s.Policy.ForPort(port)
		out.overlay(&sp)
	}
	return out, true
}

// Subset returns the subset with that name, or nil.
func (r *DestinationRule) Subset(name string) *Subset {
	if r == nil {
		return nil
	}
	for i := range r.Subsets {
		if r.Subsets[i].Name == name {
			return &r.Subsets[i]
		}
	}
	return nil
}

// PolicyIndex answers which rule applies to the traffic of a client to a
// host. It is safe for concurrent use; what it returns is immutable. A
// change to the rules of a host is reported as an event of kind
// ConfigChanged with DestinationRuleKey(host).
type PolicyIndex interface {
	// DestinationRuleFor returns the rule for traffic from a client in
	// clientNamespace to host, a service of serviceNamespace, or nil.
	// byClient reports whether the answer depends on clientNamespace
	// (a rule for the host exists in a namespace that only its own
	// clients see).
	DestinationRuleFor(host Hostname, serviceNamespace, clientNamespace string) (rule *DestinationRule, byClient bool)
}

// DestinationRuleKey is the key of the rules that apply to a host: what
// reads them depends on it.
func DestinationRuleKey(h Hostname) ConfigKey {
	return ConfigKey{Kind: KindDestinationRule, Name: string(h)}
}

// DestinationRuleKeys are the keys of every rule that may apply to a
// host: its own (DestinationRuleKey) and one per wildcard that could
// match it, "*.<each suffix after a dot>" and "*". A rule for a wildcard
// host reports its change under the wildcard's key, so what read the
// rules of a host hears of a wildcard rule made later, and of none that
// cannot match it.
func DestinationRuleKeys(h Hostname) []ConfigKey {
	out := make([]ConfigKey, 0, strings.Count(string(h), ".")+2)
	out = append(out, DestinationRuleKey(h))
	for i, c := range string(h) {
		if w := "*" + h[i:]; c == '.' && w != h {
			out = append(out, DestinationRuleKey(w))
		}
	}
	if h != "*" {
		out = append(out, DestinationRuleKey("*"))
	}
	return out
}

// WildcardMatches reports whether a wildcard host ("*.example.com",
// "*") matches host, as Istio matches them: host ends with what follows
// the "*".
func WildcardMatches(wildcard, host Hostname) bool {
	return isWildcard(wildcard) && strings.HasSuffix(string(host), string(wildcard[1:]))
}

// SortWildcards orders wildcard hosts most specific (longest) first, the
// order in which they are tried (Istio's MostSpecificHostMatch).
func SortWildcards(ws []Hostname) { slices.SortFunc(ws, compareSpecific) }
