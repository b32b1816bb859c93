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
// host's, those of the wildcards that match it, and the wildcard set's:
// model.AppendRuleKeys) and
// VaryNamespace when another client namespace could get another rule.
func (o GeneratorOptions) ruleFor(c *Client, svc *model.Service, deps []model.ConfigKey) (*model.DestinationRule, []model.ConfigKey, Vary) {
	if o.Policies == nil {
		return nil, deps, 0
	}
	deps = o.Policies.AppendDestinationRuleKeys(deps, svc.Hostname)
	rule, byClient := o.Policies.DestinationRuleFor(svc.Hostname, svc.Namespace, c.Namespace)
	if byClient {
		return rule, deps, VaryNamespace
	}
	return rule, deps, 0
}

// applyTrafficPolicy sets a cluster's load balancing and connection pool
// from a rule's traffic policy (for the cluster's port and subset, as
// model.DestinationRule.PolicyFor merges it), as Istio maps them:
// loadBalancer.simple ROUND_ROBIN, LEAST_REQUEST (LEAST_CONN) and RANDOM
// to the same lb_policy, none to LEAST_REQUEST for Envoy and round robin
// for gRPC clients, loadBalancer.consistentHash to RING_HASH or
// MAGLEV (applyConsistentHash), outlierDetection to the cluster's
// (applyOutlierDetection), connectionPool to Envoy's circuit breakers
// and connection options (applyConnectionPool, which sets istiod's
// defaults without a rule too), and for gRPC clients
// connectionPool.http.http2MaxRequests alone to max_requests, as
// istiod's grpcgen does. The result varies by client kind: Envoy always
// gets the connection pool defaults.
//
// grpc-go (v1.85) accepts lb_policy ROUND_ROBIN, RING_HASH and
// LEAST_REQUEST and NACKs the whole cluster for anything else: gRPC
// clients get round robin for RANDOM, as istiod's grpcgen keeps it
// (it logs that it cannot apply RANDOM).
func applyTrafficPolicy(c *cluster.Cluster, p model.TrafficPolicy, protocol model.Protocol, client *Client) Vary {
	vary := VaryKind
	if p.ConsistentHash != nil {
		vary |= applyConsistentHash(c, p.ConsistentHash, client)
	}
	if p.OutlierDetection != nil {
		vary |= applyOutlierDetection(c, p.OutlierDetection, client)
	}
	switch p.LoadBalancer {
	case model.LBDefault:
		// istiod's default algorithm for Envoy is LEAST_REQUEST (since
		// Istio 1.14); its grpcgen leaves gRPC clients round robin.
		if !client.GRPC && p.ConsistentHash == nil {
			c.LbPolicy = cluster.Cluster_LEAST_REQUEST
		}
	case model.LBLeastRequest:
		c.LbPolicy = cluster.Cluster_LEAST_REQUEST
	case model.LBRandom:
		if !client.GRPC {
			c.LbPolicy = cluster.Cluster_RANDOM
		}
	}
	if !client.GRPC {
		applyConnectionPool(c, p.ConnectionPool, protocol)
		return vary
	}
	if cp := p.ConnectionPool; cp != nil && cp.MaxRequests > 0 {
		c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
			MaxRequests: wrapperspb.UInt32(uint32(cp.MaxRequests)),
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

// hashPolicy is the hash policy of a route to a destination whose
// consistent hash (model.DestinationRule.HashFor) is h: what it hashes,
// as Istio's consistentHashToHashPolicy maps it (a header; a cookie with
// its name, path and TTL; the source IP; a query parameter). A route to
// a destination without a consistent hash gets none.
//
// gRPC clients get a header's hash policy only, and only with the
// cluster's ring hash (applyConsistentHash): the result varies by client
// kind otherwise. The Vary returned is to be added to the route's.
func hashPolicy(h *model.ConsistentHash, c *Client) ([]*route.RouteAction_HashPolicy, Vary) {
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
