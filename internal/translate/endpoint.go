package translate

import (
	"cmp"
	"math"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// endpointGenerator builds the ClusterLoadAssignment of
// "outbound|<port>|<subset>|<FQDN>" (a subset's: the endpoints its labels
// select, when the client's DestinationRule defines it): one LocalityLbEndpoints per
// region/zone/subzone (in a stable order), each endpoint with its health.
// An address:port appears once (grpc-go rejects duplicates). None when
// the service port does not exist or the service is a DNS alias (its
// cluster carries its address itself).
//
// A locality's load_balancing_weight is its number of HEALTHY endpoints
// (the sum of their weights, when WorkloadEntries set them, as Istio sums
// them):
// grpc-go (and gRPC's other xDS clients) pick a locality by weight alone,
// then skip its endpoints that are not HEALTHY, so a weight that counted
// DRAINING or UNHEALTHY endpoints would send the locality's few ready
// endpoints the traffic of those going away. A locality with no HEALTHY
// endpoint must attract nothing, and the two kinds of client get it in
// the shape each handles best (see localityWithoutHealthy); when there is
// no such locality both get the same resource. The localityLbSetting of
// the cluster's DestinationRule policy, else MeshConfig's, then orders
// or reweighs the localities for the client (endpoint_locality.go), for
// gRPC clients as for Envoy: istiod's gRPC clients get the same
// endpoint assignments as its sidecars.
type endpointGenerator struct{ GeneratorOptions }

func (*endpointGenerator) Type() ResourceType {
	return ResourceType{URL: resource.EndpointType, Short: "EDS", Wildcard: true}
}

func (g *endpointGenerator) AllNames() []string { return clusterNames(g.Discovery, true) }

func (g *endpointGenerator) Generate(c *Client, name string) Result {
	svc, key, deps, vary := clusterTarget(g.Discovery, c, name, model.KindEndpoints)
	if svc == nil || svc.Resolution == model.DNSAlias {
		return Result{Deps: deps, Vary: vary}
	}
	port := key.Port
	// The rule gives the subset's labels and the cluster's policy, whose
	// localityLbSetting and outlier detection decide locality load
	// balancing.
	rule, deps, rv := g.ruleFor(c, svc, deps)
	vary |= rv
	policy, ok := rule.PolicyFor(port, key.Subset)
	if !ok {
		return Result{Deps: deps, Vary: vary}
	}
	var selector model.Labels
	if s := rule.Subset(key.Subset); s != nil {
		// A subset without labels selects every endpoint, as in Istio.
		selector = s.Labels
	}
	// A rule's localityLbSetting comes before the service's
	// trafficDistribution, which comes before the mesh's setting, as in
	// Istio (GetEffectiveLbSetting).
	near := closenessFor(svc, c, policy.LocalityLB == nil)
	eps := model.EndpointsOf(g.Discovery, svc, port, selector)
	scope, eps, scopeVary := g.clusterScopeFor(c, svc, eps)
	deps = append(deps, model.MeshServiceSettingsKey)
	vary |= scopeVary
	var loc localityPlan
	if !near.byZone && !near.byNode {
		setting := policy.LocalityLB
		if setting == nil {
			deps = append(deps, model.MeshLocalityLBKey)
			setting = g.MeshSettings().LocalityLB
		}
		var v Vary
		loc, v = localityFor(c, setting, policy, eps)
		vary |= v
	}
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	groups := map[groupKey]*localityGroup{}
	var order []*localityGroup
	seen := make(map[addrPort]struct{}, len(eps))
	for _, ep := range eps {
		priority, ok := near.priority(ep)
		if !ok {
			continue
		}
		key := addrPort{ep.Address, ep.Port}
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = struct{}{}
		priority = priority*localityPriorities + loc.priority(ep.Locality)
		gk := groupKey{ep.Locality, priority}
		grp := groups[gk]
		if grp == nil {
			grp = &localityGroup{priority: priority, sortKey: ep.Locality.String(), lle: &endpoint.LocalityLbEndpoints{
				Locality: &core.Locality{Region: ep.Locality.Region, Zone: ep.Locality.Zone, SubZone: ep.Locality.Subzone},
				Priority: priority,
			}}
			groups[gk] = grp
			order = append(order, grp)
		}
		lb := &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
				Address: socketAddress(ep.Address, ep.Port),
			}},
			HealthStatus: healthStatus(ep.Health),
			Metadata:     scope.metadata(ep),
		}
		weight := uint32(1)
		if ep.Weight > 0 {
			// A WorkloadEntry's weight: the endpoint's share, and its
			// share of the locality's weight, as Istio sums them.
			weight = ep.Weight
			lb.LoadBalancingWeight = wrapperspb.UInt32(weight)
		}
		grp.lle.LbEndpoints = append(grp.lle.LbEndpoints, lb)
		if ep.Health == model.Healthy {
			grp.healthy = addWeight(grp.healthy, weight)
		}
	}
	slices.SortFunc(order, func(a, b *localityGroup) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), strings.Compare(a.sortKey, b.sortKey))
	})
	vary |= near.vary
	order = loc.distribute(order)
	for _, grp := range order {
		if grp.healthy > 0 {
			grp.lle.LoadBalancingWeight = wrapperspb.UInt32(grp.weight())
		} else {
			vary |= VaryKind
			if !localityWithoutHealthy(c) {
				continue
			}
		}
		cla.Endpoints = append(cla.Endpoints, grp.lle)
	}
	compactPriorities(cla.Endpoints)
	return Result{Resource: cla, Deps: deps, Vary: vary}
}

// groupKey: endpoints of one locality at one priority share a
// LocalityLbEndpoints.
type groupKey struct {
	locality model.Locality
	priority uint32
}

// closeness decides, for one client, which endpoints of a service it gets
// and at which priority, from the service's internal traffic policy and
// traffic distribution, as Kubernetes defines them and Istio serves them
// (pilot/pkg/networking/core/loadbalancer, endpoint builder):
//   - internalTrafficPolicy Local: only endpoints on the client's node. A
//     client whose node is unknown gets none, as a node with no local
//     endpoint does: kube-proxy drops such traffic rather than send it
//     elsewhere.
//   - trafficDistribution PreferSameZone (PreferClose): endpoints in the
//     client's region and zone at priority 0, the others at 1, so that
//     clients fail over to other zones only when theirs has nothing
//     healthy. PreferSameNode likewise by node. A client whose zone (node)
//     is unknown gets every endpoint at one priority.
//
// vary says which client facts that made the result depend on.
type closeness struct {
	local          bool // internalTrafficPolicy Local
	node           string
	byZone, byNode bool
	region, zone   string
	vary           Vary
}

// byDistribution false leaves trafficDistribution out: a rule's
// localityLbSetting replaces it.
func closenessFor(svc *model.Service, c *Client, byDistribution bool) closeness {
	n := closeness{node: c.NodeName, region: c.Locality.Region, zone: c.Locality.Zone}
	if svc.InternalTrafficPolicy == model.InternalTrafficLocal {
		n.local = true
		n.vary |= VaryNode
	}
	if !byDistribution {
		return n
	}
	switch svc.TrafficDistribution {
	case model.PreferSameZone:
		n.byZone = true
		n.vary |= VaryZone
	case model.PreferSameNode:
		n.byNode = true
		n.vary |= VaryNode
	}
	return n
}

// priority returns an endpoint's priority for the client, and false when
// the client must not get it.
func (n *closeness) priority(ep *model.Endpoint) (uint32, bool) {
	if n.local && (n.node == "" || ep.NodeName != n.node) {
		return 0, false
	}
	switch {
	case n.byZone && n.zone != "":
		if ep.Locality.Region == n.region && ep.Locality.Zone == n.zone {
			return 0, true
		}
		return 1, true
	case n.byNode && n.node != "":
		if ep.NodeName == n.node {
			return 0, true
		}
		return 1, true
	}
	return 0, true
}

// compactPriorities renumbers the priorities of sorted entries 0, 1, ...
// without gaps: when no close endpoint is left (or none HEALTHY, for a
// gRPC client), the others must be at priority 0. gRPC clients reject a
// ClusterLoadAssignment whose priorities skip a number, and Envoy would
// wait on an empty priority.
func compactPriorities(lles []*endpoint.LocalityLbEndpoints) {
	var next, last uint32
	for i, l := range lles {
		if i > 0 && l.Priority != last {
			next++
		}
		last = l.Priority
		l.Priority = next
	}
}

// addrPort is what makes two endpoints one for a client: grpc-go rejects
// an address:port listed twice.
type addrPort struct {
	addr string
	port uint32
}

// localityGroup gathers the endpoints of one locality while a
// ClusterLoadAssignment is built.
type localityGroup struct {
	lle      *endpoint.LocalityLbEndpoints
	priority uint32
	healthy  uint32 // the weights of its HEALTHY endpoints (1 each unless set): the locality's weight
	sortKey  string // "region/zone/subzone", computed once for sorting
	// distributed, when not zero, replaces healthy as the locality's
	// weight (localityLbSetting distribute).
	distributed uint32
}

// addWeight adds an endpoint's weight to its locality's, stopping at the
// largest uint32: WorkloadEntry weights may each be up to that, and a sum
// that wrapped around could come to 0, which grpc-go reads as a locality
// to drop.
func addWeight(sum, w uint32) uint32 {
	if sum > math.MaxUint32-w {
		return math.MaxUint32
	}
	return sum + w
}

func (g *localityGroup) weight() uint32 {
	if g.distributed > 0 {
		return g.distributed
	}
	return g.healthy
}

// localityWithoutHealthy says whether a client is sent a locality that
// has no HEALTHY endpoint (with no load_balancing_weight).
//
// gRPC clients are not: grpc-go drops a locality whose weight is 0 or
// unset (logging a warning on every update) and never sends to an
// endpoint that is not HEALTHY, so leaving the locality out changes
// nothing for it, and does not depend on how each gRPC implementation
// treats a weight of 0.
//
// Envoy is: it balances over hosts, not localities (meshpilot's clusters
// do not enable locality-weighted balancing), takes no new requests to
// DRAINING or UNHEALTHY hosts (the clusters' healthy panic threshold is
// 0), and seeing a host as DRAINING lets it drain that host's connections
// rather than drop them. Its validation accepts an unset weight but not 0
// (load_balancing_weight must be at least 1 when set).
func localityWithoutHealthy(c *Client) bool { return !c.GRPC }

func healthStatus(h model.Health) core.HealthStatus {
	switch h {
	case model.Healthy:
		return core.HealthStatus_HEALTHY
	case model.Draining:
		return core.HealthStatus_DRAINING
	default:
		return core.HealthStatus_UNHEALTHY
	}
}
