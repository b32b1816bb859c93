package xds

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// clusterTarget reads a cluster or ClusterLoadAssignment name,
// "outbound|<port>|<subset>|<FQDN>", and finds the service port it
// designates, as servicePort does, keeping the subset. The subset is not
// checked here: only the rule for the client says which exist.
func clusterTarget(d model.ServiceDiscovery, name string, kind model.KeyKind) (*model.Service, model.ClusterKey, []model.ConfigKey) {
	k, ok := model.ParseClusterName(name)
	if !ok {
		return nil, k, nil
	}
	// Room for the model.DestinationRuleKey in the same allocation.
	deps := append(make([]model.ConfigKey, 0, 2), model.ConfigKey{Kind: kind, Name: string(k.Host)})
	svc := d.GetService(k.Host)
	if svc == nil {
		return nil, k, deps
	}
	if _, ok := svc.PortByNumber(k.Port); !ok {
		return nil, k, deps
	}
	return svc, k, deps
}

// ruleFor returns the DestinationRule a client's traffic to a service
// follows (nil: none), with the key it depends on added to deps and
// VaryNamespace when another client namespace could get another rule.
func (o GeneratorOptions) ruleFor(c *Client, svc *model.Service, deps []model.ConfigKey) (*model.DestinationRule, []model.ConfigKey, Vary) {
	if o.Policies == nil {
		return nil, deps, 0
	}
	deps = append(deps, model.DestinationRuleKey(svc.Hostname))
	rule, byClient := o.Policies.DestinationRuleFor(svc.Hostname, svc.Namespace, c.Namespace)
	if byClient {
		return rule, deps, VaryNamespace
	}
	return rule, deps, 0
}

// applyTrafficPolicy sets a cluster's load balancing and circuit breaker
// from a rule's traffic policy, as Istio maps them:
// loadBalancer.simple ROUND_ROBIN, LEAST_REQUEST (LEAST_CONN) and RANDOM
// to the same lb_policy, connectionPool.http.http2MaxRequests to the
// default-priority threshold's max_requests (which grpc-go also honours).
//
// grpc-go (v1.85) accepts lb_policy ROUND_ROBIN, RING_HASH and
// LEAST_REQUEST and NACKs the whole cluster for anything else: gRPC
// clients get round robin for RANDOM, the closest it has (both spread
// requests evenly without state), and the result varies by client kind.
func applyTrafficPolicy(c *cluster.Cluster, p model.TrafficPolicy, client *Client) Vary {
	var vary Vary
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
