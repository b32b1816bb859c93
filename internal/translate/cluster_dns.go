package translate

import (
	"cmp"
	"slices"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// resolveEndpointNames makes cl, a DNS alias's cluster, resolve the
// service's endpoints rather than an external name: a DNS ServiceEntry
// with endpoints, whose addresses may be names. Envoy gets STRICT_DNS
// over every endpoint, as istiod sends it. grpc-go has LOGICAL_DNS and
// aggregate clusters but NACKs STRICT_DNS, and a LOGICAL_DNS cluster
// holds exactly one endpoint: gRPC clients get LOGICAL_DNS to the first
// endpoint (by address), which is what a one-endpoint entry, the common
// case, means; istiod sends them nothing that works. False when there
// is no endpoint: then there is no cluster.
func resolveEndpointNames(cl *cluster.Cluster, eps []*model.Endpoint, grpc bool) bool {
	if len(eps) == 0 {
		return false
	}
	if grpc {
		eps = eps[:1]
	} else {
		cl.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_STRICT_DNS}
	}
	byLocality := map[model.Locality]*endpoint.LocalityLbEndpoints{}
	var order []model.Locality
	for _, ep := range eps {
		lle := byLocality[ep.Locality]
		if lle == nil {
			lle = &endpoint.LocalityLbEndpoints{Locality: &core.Locality{Region: ep.Locality.Region, Zone: ep.Locality.Zone, SubZone: ep.Locality.Subzone}}
			byLocality[ep.Locality] = lle
			order = append(order, ep.Locality)
		}
		lb := &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: socketAddress(ep.Address, ep.Port),
		}}}
		if ep.Weight > 0 && !grpc {
			lb.LoadBalancingWeight = wrapperspb.UInt32(ep.Weight)
		}
		lle.LbEndpoints = append(lle.LbEndpoints, lb)
	}
	slices.SortFunc(order, func(a, b model.Locality) int { return cmp.Compare(a.String(), b.String()) })
	cl.LoadAssignment = &endpoint.ClusterLoadAssignment{ClusterName: cl.Name}
	for _, l := range order {
		cl.LoadAssignment.Endpoints = append(cl.LoadAssignment.Endpoints, byLocality[l])
	}
	return true
}
