package translate

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// clusterTarget reads a cluster or ClusterLoadAssignment name,
// "outbound|<port>|<subset>|<FQDN>", and finds the service port it
// designates, as servicePort does, keeping the subset. The subset is not
// checked here: only the rule for the client says which exist. What is
// built from it depends on the service's key of the given kind: its
// definition (KindService), or its endpoints (KindEndpoints, which a
// change of the definition touches too).
func clusterTarget(d model.ServiceDiscovery, c *Client, name string, kind model.KeyKind) (*model.Service, model.ClusterKey, []model.ConfigKey, Vary) {
	k, ok := model.ParseClusterName(name)
	if !ok {
		return nil, k, nil, 0
	}
	// Room for the model.DestinationRuleKey in the same allocation.
	deps := append(make([]model.ConfigKey, 0, 2), model.ConfigKey{Kind: kind, Name: string(k.Host)})
	svc, vary := visibleService(d, c, k.Host)
	if svc == nil {
		return nil, k, deps, vary
	}
	if _, ok := svc.PortByNumber(k.Port); !ok {
		return nil, k, deps, vary
	}
	return svc, k, deps, vary
}

// ruleFor returns the DestinationRule a client's traffic to a service
// follows (nil: none), with the keys it depends on added to deps (the
// host's and those of the wildcards that could match it) and
// VaryNamespace when another client namespace could get another rule.
func (o GeneratorOptions) ruleFor(c *Client, svc *model.Service, deps []model.ConfigKey) (*model.DestinationRule, []model.ConfigKey, Vary) {
	if o.Policies == nil {
		return nil, deps, 0
	}
	deps = append(deps, model.DestinationRuleKeys(svc.Hostname)...)
	rule, byClient := o.Policies.DestinationRuleFor(svc.Hostname, svc.Namespace, c.Namespace)
	var vary Vary
	if byClient {
		vary = VaryNamespace
	}
	if sel, v := selectorRule(o.Policies, c, svc.Hostname, rule); v != 0 {
		vary |= v
		if sel != nil {
			rule = sel
		}
	}
	return rule, deps, vary
}

// selectorRule finds the rule with a workloadSelector that a client
// follows to host instead of plain, the rule chosen without them, as
// istiod's SidecarScope.DestinationRule picks it: the first of the
// client's namespace whose selector matches its labels. One for a
// wildcard does not beat plain when plain is the namespace's own rule
// for the host itself, the more specific match. Unlike istiod, a client
// that no selector matches keeps plain even when its namespace has only
// selector rules for the host (istiod leaves it without any rule). The
// answer varies by namespace once any namespace has such a rule for the
// host, and by labels for the clients of a namespace that has one.
func selectorRule(p model.PolicyIndex, c *Client, host model.Hostname, plain *model.DestinationRule) (*model.DestinationRule, Vary) {
	sp, ok := p.(model.SelectorPolicyIndex)
	if !ok {
		return nil, 0
	}
	rules, anyNS := sp.SelectorRulesFor(host, c.Namespace)
	if !anyNS {
		return nil, 0
	}
	if len(rules) == 0 {
		return nil, VaryNamespace
	}
	ownExact := plain != nil && plain.Namespace == c.Namespace && plain.Host == host
	for _, r := range rules {
		if r.Host != host && ownExact {
			break // the wildcards come last
		}
		if r.Selects(c.labels) {
			return r, VaryNamespace | VaryLabels
		}
	}
	return nil, VaryNamespace | VaryLabels
}

// applyTrafficPolicy sets a cluster's load balancing and circuit breaker
// from a rule's traffic policy, as Istio maps them:
// loadBalancer.simple ROUND_ROBIN, LEAST_REQUEST (LEAST_CONN) and RANDOM
// to the same lb_policy, loadBalancer.consistentHash to RING_HASH or
// MAGLEV (applyConsistentHash), outlierDetection to the cluster's
// (applyOutlierDetection), connectionPool.http.http2MaxRequests to
// the default-priority threshold's max_requests (which grpc-go also
// honours).
//
// grpc-go (v1.85) accepts lb_policy ROUND_ROBIN, RING_HASH and
// LEAST_REQUEST and NACKs the whole cluster for anything else: gRPC
// clients get round robin for RANDOM, the closest it has (both spread
// requests evenly without state), and the result varies by client kind.
func applyTrafficPolicy(c *cluster.Cluster, p model.TrafficPolicy, client *Client) Vary {
	var vary Vary
	if p.ConsistentHash != nil {
		vary |= applyConsistentHash(c, p.ConsistentHash, client)
	}
	if p.OutlierDetection != nil {
		vary |= applyOutlierDetection(c, p.OutlierDetection, client)
	}
	switch p.LoadBalancer {
	case model.LBLeastRequest:
		c.LbPolicy = cluster.Cluster_LEAST_REQUEST
	case model.LBRandom:
		vary |= VaryKind
		if !client.GRPC {
			c.LbPolicy = cluster.Cluster_RANDOM
		}
	}
	if p.MaxRequests > 0 {
		c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
			MaxRequests: wrapperspb.UInt32(uint32(p.MaxRequests)),
		}}}
	}
	return vary
}

// applyConsistentHash sets a consistent hash's load balancing as Istio's
// cluster builder does: MAGLEV with its table size, or RING_HASH with
// its minimum ring size. The key to hash is the route's (hashPolicy).
//
// grpc-go hashes only what a route's header hash policy names, on a
// ring: it NACKs MAGLEV, and a ring without a usable hash policy picks a
// random endpoint per request. So gRPC clients get the ring only for a
// header key without Maglev, and round robin otherwise (the result then
// varies by client kind; the conversion reports the field).
func applyConsistentHash(c *cluster.Cluster, h *model.ConsistentHash, client *Client) Vary {
	var vary Vary
	if !grpcHashes(h) {
		vary = VaryKind
		if client.GRPC {
			return vary
		}
	}
	if h.Maglev {
		c.LbPolicy = cluster.Cluster_MAGLEV
		if h.MaglevTableSize != 0 {
			c.LbConfig = &cluster.Cluster_MaglevLbConfig_{MaglevLbConfig: &cluster.Cluster_MaglevLbConfig{
				TableSize: wrapperspb.UInt64(h.MaglevTableSize),
			}}
		}
		return vary
	}
	c.LbPolicy = cluster.Cluster_RING_HASH
	if h.MinimumRingSize != 0 {
		c.LbConfig = &cluster.Cluster_RingHashLbConfig_{RingHashLbConfig: &cluster.Cluster_RingHashLbConfig{
			MinimumRingSize: wrapperspb.UInt64(h.MinimumRingSize),
		}}
	}
	return vary
}

// grpcHashes says whether gRPC clients get a consistent hash: a ring
// hash on a header.
func grpcHashes(h *model.ConsistentHash) bool {
	return h.HeaderName != "" && !h.Maglev
}

// hashPolicy is the hash policy of a route to a destination whose traffic
// policy (for the destination's port and subset) is p: what its
// consistent hash hashes, as Istio's consistentHashToHashPolicy maps it
// (a header; a cookie with its name, path and TTL; the source IP; a query
// parameter). A route to a destination without a consistent hash gets
// none.
//
// gRPC clients get a header's hash policy only, and only with the
// cluster's ring hash (applyConsistentHash): the result varies by client
// kind otherwise. The Vary returned is to be added to the route's.
func hashPolicy(p model.TrafficPolicy, c *Client) ([]*route.RouteAction_HashPolicy, Vary) {
	h := p.ConsistentHash
	if h == nil {
		return nil, 0
	}
	var vary Vary
	if !grpcHashes(h) {
		vary = VaryKind
		if c.GRPC {
			return nil, vary
		}
	}
	out := &route.RouteAction_HashPolicy{}
	switch {
	case h.HeaderName != "":
		out.PolicySpecifier = &route.RouteAction_HashPolicy_Header_{Header: &route.RouteAction_HashPolicy_Header{HeaderName: h.HeaderName}}
	case h.Cookie != nil:
		ck := &route.RouteAction_HashPolicy_Cookie{Name: h.Cookie.Name, Path: h.Cookie.Path}
		if h.Cookie.TTL != 0 {
			ck.Ttl = durationpb.New(h.Cookie.TTL)
		}
		out.PolicySpecifier = &route.RouteAction_HashPolicy_Cookie_{Cookie: ck}
	case h.SourceIP:
		out.PolicySpecifier = &route.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &route.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
	case h.QueryParameter != "":
		out.PolicySpecifier = &route.RouteAction_HashPolicy_QueryParameter_{
			QueryParameter: &route.RouteAction_HashPolicy_QueryParameter{Name: h.QueryParameter}}
	default:
		return nil, vary
	}
	return []*route.RouteAction_HashPolicy{out}, vary
}

// applyOutlierDetection sets a cluster's outlier detection as Istio's
// cluster builder does for Envoy: success-rate ejection off, each
// consecutive-error count with its enforcement at 100% (0 when the count
// is 0, which turns it off), interval, base ejection time and maximum
// ejection percent as given, local-origin errors split on request; and
// failurePercentageThreshold as failure-percentage ejection enforced at
// 100%. The panic threshold stays 0 (buildCluster): minHealthPercent is
// reported as ignored.
//
// grpc-go (gRFC A50) ejects only by success rate or failure percentage
// and turns success-rate ejection on unless told otherwise: gRPC clients
// get the failure percentage with the interval, base ejection time and
// maximum ejection percent, which mean the same to it, success rate off,
// and no outlier detection at all without a failure percentage. The
// result varies by client kind when the two differ.
func applyOutlierDetection(c *cluster.Cluster, o *model.OutlierDetection, client *Client) Vary {
	var vary Vary
	if o.Consecutive5xx != nil || o.ConsecutiveGateway != nil || o.SplitLocalOrigin || o.FailurePercentage == nil {
		vary = VaryKind
	}
	if client.GRPC && o.FailurePercentage == nil {
		return vary
	}
	out := &cluster.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(0)}
	if o.Interval > 0 {
		out.Interval = durationpb.New(o.Interval)
	}
	if o.BaseEjectionTime > 0 {
		out.BaseEjectionTime = durationpb.New(o.BaseEjectionTime)
	}
	if o.MaxEjectionPercent > 0 {
		out.MaxEjectionPercent = wrapperspb.UInt32(o.MaxEjectionPercent)
	}
	if v := o.FailurePercentage; v != nil {
		out.FailurePercentageThreshold, out.EnforcingFailurePercentage = wrapperspb.UInt32(*v), enforcing(*v)
	}
	if client.GRPC {
		c.OutlierDetection = out
		return vary
	}
	if v := o.Consecutive5xx; v != nil {
		out.Consecutive_5Xx, out.EnforcingConsecutive_5Xx = wrapperspb.UInt32(*v), enforcing(*v)
	}
	if v := o.ConsecutiveGateway; v != nil {
		out.ConsecutiveGatewayFailure, out.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(*v), enforcing(*v)
	}
	if o.SplitLocalOrigin {
		out.SplitExternalLocalOriginErrors = true
		if v := o.ConsecutiveLocalOrigin; v != nil {
			out.ConsecutiveLocalOriginFailure, out.EnforcingConsecutiveLocalOriginFailure = wrapperspb.UInt32(*v), enforcing(*v)
		}
		out.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(0)
	}
	c.OutlierDetection = out
	return vary
}

// enforcing is the enforcement percentage of an ejection check, as
// Istio sets it: 100 when its threshold is set, 0 (off) when the
// threshold is 0.
func enforcing(threshold uint32) *wrapperspb.UInt32Value {
	if threshold > 0 {
		return wrapperspb.UInt32(100)
	}
	return wrapperspb.UInt32(0)
}
