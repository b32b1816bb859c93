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
	// no rule of their own in its namespace (RuleIndex).
	Host Hostname
	// Policy applies to every cluster of the host, unless a port's or a
	// subset's overrides it.
	Policy  *TrafficPolicy
	Subsets []Subset
	// ExportTo lists the namespaces whose clients see the rule, as Istio
	// writes them: "*" every namespace, "." the rule's own, "~" none;
	// empty means MeshConfig's defaultDestinationRuleExportTo.
	ExportTo []string
	// Selector, when not nil, is the rule's workloadSelector: it applies
	// only to the clients of its namespace whose labels match (an empty
	// one to every client of its namespace), ExportTo aside
	// (policy_selector.go).
	Selector *Labels
	// Created orders the rules of one namespace for one host, which
	// Istio merges oldest first (ConsolidateRules), and orders rules
	// with a workloadSelector likewise.
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
	// clusters, block by block as Istio merges them (PolicyFor).
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

// TrafficPolicy is the part of a rule's trafficPolicy meshpilot applies,
// in the blocks Istio merges whole: loadBalancer (LoadBalancer,
// ConsistentHash, LocalityLB), connectionPool, outlierDetection, tls.
type TrafficPolicy struct {
	// LoadBalancer is loadBalancer.simple; ConsistentHash, when set,
	// is loadBalancer.consistentHash instead (one of the two is set).
	LoadBalancer   LoadBalancer
	ConsistentHash *ConsistentHash
	// LocalityLB, when set, is loadBalancer.localityLbSetting: it
	// replaces the mesh's for the clusters the policy applies to.
	LocalityLB *LocalityLB
	// LoadBalancerSet says that the policy has a loadBalancer block even
	// if it sets none of the fields above: the block still replaces the
	// one it merges over.
	LoadBalancerSet bool
	// ConnectionPool, when set, is connectionPool.
	ConnectionPool *ConnectionPool
	// OutlierDetection, when set, is outlierDetection.
	OutlierDetection *OutlierDetection
	// TLS, when set, is tls: how to secure connections to the endpoints.
	TLS *ClientTLS
	// PortLevel holds the per-port policies, by port number: a port's
	// replaces the policy it is in as a whole (ForPort).
	PortLevel map[int32]*TrafficPolicy
}

// hasLoadBalancer says whether the policy has a loadBalancer block.
func (p *TrafficPolicy) hasLoadBalancer() bool {
	return p.LoadBalancerSet || p.LoadBalancer != LBDefault || p.ConsistentHash != nil || p.LocalityLB != nil
}

// ConnectionPool is connectionPool. A zero count or duration is unset.
type ConnectionPool struct {
	// TCP settings: tcp.maxConnections, connectTimeout,
	// maxConnectionDuration, idleTimeout, tcpKeepalive.
	MaxConnections        int32
	ConnectTimeout        time.Duration
	MaxConnectionDuration time.Duration
	TCPIdleTimeout        time.Duration
	TCPKeepalive          *TCPKeepalive
	// HTTP settings: http.http1MaxPendingRequests, http2MaxRequests,
	// maxRequestsPerConnection, maxRetries, idleTimeout,
	// maxConcurrentStreams, h2UpgradePolicy, useClientProtocol,
	// http2KeepAlive.
	MaxPendingRequests       int32
	MaxRequests              int32
	MaxRequestsPerConnection int32
	MaxRetries               int32
	HTTPIdleTimeout          time.Duration
	MaxConcurrentStreams     int32
	H2Upgrade                H2UpgradePolicy
	UseClientProtocol        bool
	HTTP2KeepAlive           *HTTP2KeepAlive
}

// HTTP2KeepAlive is http.http2KeepAlive: HTTP/2 PINGs on idle
// connections; zero fields are unset.
type HTTP2KeepAlive struct {
	Interval, Timeout time.Duration
}

// H2UpgradePolicy is http.h2UpgradePolicy.
type H2UpgradePolicy uint8

const (
	// H2UpgradeDefault: the mesh's (Istio's default mesh: do not upgrade).
	H2UpgradeDefault H2UpgradePolicy = iota
	H2DoNotUpgrade
	H2Upgrade
)

// TCPKeepalive is tcp.tcpKeepalive; zero fields are unset.
type TCPKeepalive struct {
	Probes         uint32
	Time, Interval time.Duration
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

// ForPort returns the policy in force on a port: the port's settings
// when the policy has some for it, else the policy's own. As in Istio
// (GetPortLevelTrafficPolicy), a port's settings replace the policy as a
// whole: a block they leave out falls back to its default, not to the
// policy's.
func (p *TrafficPolicy) ForPort(port int32) TrafficPolicy {
	out, _ := p.forPort(port)
	return out
}

// forPort is ForPort, saying whether the port had settings of its own.
func (p *TrafficPolicy) forPort(port int32) (TrafficPolicy, bool) {
	if p == nil {
		return TrafficPolicy{}, false
	}
	if pl := p.PortLevel[port]; pl != nil {
		out := *pl
		out.PortLevel = nil
		return out, true
	}
	out := *p
	out.PortLevel = nil
	return out, false
}

// mergeOver replaces the blocks of p that o sets; with whole, every
// block, set or not (Istio's MergeTrafficPolicy: a subset's port-level
// settings replace the rule's policy wholesale, the subset's own
// policy block by block).
func (p *TrafficPolicy) mergeOver(o *TrafficPolicy, whole bool) {
	if whole || o.hasLoadBalancer() {
		p.LoadBalancer, p.ConsistentHash, p.LocalityLB, p.LoadBalancerSet = o.LoadBalancer, o.ConsistentHash, o.LocalityLB, o.LoadBalancerSet
	}
	if whole || o.ConnectionPool != nil {
		p.ConnectionPool = o.ConnectionPool
	}
	if whole || o.OutlierDetection != nil {
		p.OutlierDetection = o.OutlierDetection
	}
	if whole || o.TLS != nil {
		p.TLS = o.TLS
	}
}

// PolicyFor returns the traffic policy of a cluster of the rule, as
// Istio's MergeSubsetTrafficPolicy builds it: the rule's policy for the
// port (ForPort); for a subset, the subset's port-level settings for
// the port replace that as a whole, else the subset's policy replaces
// the blocks it sets. subset is "" for the whole host; a subset the rule
// does not define yields false.
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
		sp, portLevel := s.Policy.forPort(port)
		out.mergeOver(&sp, portLevel)
	}
	return out, true
}

// HashFor returns the consistent hash of the route to a destination of
// the rule's host, as Istio looks it up for a route's hash policy
// (HashForHTTPDestination), which is not how clusters merge: the
// subset's port-level hash, else the subset's, else the rule's
// port-level hash, else the rule's; port-level settings count only when
// the destination names its port (port != 0). A hash is taken from the
// first of these that has one, whatever else they set.
func (r *DestinationRule) HashFor(port int32, subset string) *ConsistentHash {
	if r == nil {
		return nil
	}
	portHash := func(p *TrafficPolicy) *ConsistentHash {
		if p == nil || port == 0 || p.PortLevel[port] == nil {
			return nil
		}
		return p.PortLevel[port].ConsistentHash
	}
	var subsetPolicy *TrafficPolicy
	if s := r.Subset(subset); subset != "" && s != nil {
		subsetPolicy = s.Policy
	}
	if h := portHash(subsetPolicy); h != nil {
		return h
	}
	if subsetPolicy != nil && subsetPolicy.ConsistentHash != nil {
		return subsetPolicy.ConsistentHash
	}
	if h := portHash(r.Policy); h != nil {
		return h
	}
	if r.Policy != nil {
		return r.Policy.ConsistentHash
	}
	return nil
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
	// AppendDestinationRuleKeys appends to deps the keys that what reads
	// host's rules depends on (AppendRuleKeys over the index's wildcard
	// hosts).
	AppendDestinationRuleKeys(deps []ConfigKey, host Hostname) []ConfigKey
}

// DestinationRuleKey is the key of the rules that apply to a host: what
// reads them depends on it.
func DestinationRuleKey(h Hostname) ConfigKey {
	return ConfigKey{Kind: KindDestinationRule, Name: string(h)}
}

// AppendRuleKeys appends to deps the keys that what reads the rules of
// host depends on, given the wildcard hosts that have rules now: the
// host's own DestinationRuleKey, that of each of those wildcards that
// matches it, and DestinationRuleKey("*"). The last also stands for the
// set of wildcard hosts: an index reports it when a wildcard host gains
// its first rule or loses its last, so that a host a new wildcard
// matches hears of it, while a change to the rules of a wildcard that
// exists reaches only the hosts it matches. Naming only the wildcards
// that exist, rather than every suffix of the host that could be one,
// keeps a watch's keys (and the strings built for them) to two or three.
func AppendRuleKeys(deps []ConfigKey, host Hostname, wildcards []Hostname) []ConfigKey {
	return appendRuleKeys(deps, host, wildcards, nil)
}

// AppendRuleKeysWithSelectors is AppendRuleKeys over the wildcard hosts
// of plain rules and those of rules with a workloadSelector.
func AppendRuleKeysWithSelectors(deps []ConfigKey, host Hostname, wildcards []Hostname, selectors *SelectorRules) []ConfigKey {
	return appendRuleKeys(deps, host, wildcards, selectors.WildcardHosts())
}

func appendRuleKeys(deps []ConfigKey, host Hostname, wildcards, more []Hostname) []ConfigKey {
	deps = append(deps, DestinationRuleKey(host))
	for _, w := range wildcards {
		if w != "*" && w != host && WildcardMatches(w, host) {
			deps = append(deps, DestinationRuleKey(w))
		}
	}
	for _, w := range more {
		if w != "*" && w != host && WildcardMatches(w, host) && !slices.Contains(wildcards, w) {
			deps = append(deps, DestinationRuleKey(w))
		}
	}
	if host != "*" {
		deps = append(deps, DestinationRuleKey("*"))
	}
	return deps
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
