package translate

import (
	"maps"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// localityPriorities is how many priorities locality failover makes (0
// to 4): a closeness priority is multiplied by it, so that the two
// compose, as Istio composes failoverPriority and failover.
const localityPriorities = 5

// localityPlan is what a localityLbSetting (MeshConfig's, or a
// DestinationRule's) does to one client's endpoint assignment, as Istio applies it
// (pilot/pkg/networking/core/loadbalancer: applyLocalityFailover,
// applyLocalityWeights). The zero value changes nothing.
type localityPlan struct {
	// failover: priorities by closeness to client: same subzone 0, zone
	// 1, region 2, the failover region of the client's region 3, other
	// regions 4 (3 when the client's region has no failover entry).
	failover bool
	client   model.Locality
	// failoverTo is the region the client's region fails over to; ""
	// when none is named.
	failoverTo string
	// weights is the distribute entry of the client's locality: each
	// destination pattern's share; nil when none applies.
	weights map[string]uint32
	vary    Vary
}

// planLocality reads a locality setting for client c (nil: Istio's
// default mesh's). needsRule says
// that the plan holds only for a cluster with outlier detection, which
// the caller checks: as Istio says, without it nothing would ever mark
// the close endpoints unhealthy, and failing over needs that (Envoy keeps
// sending to hosts it has no reason to doubt; gRPC clients would fail
// over on lost connections alone, but are treated alike).
func planLocality(s *model.LocalityLB, c *Client) (p localityPlan, needsRule bool) {
	if s == nil {
		// Istio's default mesh: enabled, nothing set.
		s = &model.LocalityLB{}
	}
	if s.Disabled {
		return localityPlan{}, false
	}
	if len(s.Distribute) > 0 {
		// Weights need no outlier detection. The first entry whose
		// from matches the client applies.
		p.vary = VaryLocality
		for _, d := range s.Distribute {
			if c.Locality.Matches(d.From) {
				p.weights = d.To
				break
			}
		}
		return p, false
	}
	if len(s.FailoverPriority) > 0 && len(s.Failover) == 0 {
		// Ordered by the client's labels, which meshpilot does not
		// know: Istio does nothing for a client without labels either.
		return localityPlan{}, false
	}
	p = localityPlan{failover: true, client: c.Locality, vary: VaryLocality}
	for _, f := range s.Failover {
		if f.From == c.Locality.Region {
			p.failoverTo = f.To
			break
		}
	}
	return p, true
}

// priority is the failover priority of an endpoint locality.
func (p *localityPlan) priority(l model.Locality) uint32 {
	if !p.failover {
		return 0
	}
	switch {
	case l.Region != p.client.Region:
		if p.failoverTo != "" && l.Region != p.failoverTo {
			return 4
		}
		return 3
	case l.Zone != p.client.Zone:
		return 2
	case l.Subzone != p.client.Subzone:
		return 1
	}
	return 0
}

// distribute gives each locality its share of the client's distribute
// entry and leaves out the localities it names none for, as Istio does
// (which sends them with no endpoints). A destination pattern's share
// is split among the localities it matches by their weights (rounded
// up); a locality matched by several patterns takes the first in sorted
// order (Istio's order is that of a map). A locality without a HEALTHY
// endpoint keeps no weight: its share is lost rather than sent where
// nothing serves. gRPC clients always pick a locality by weight; Envoy
// does only on a cluster with locality-weighted balancing, which Istio
// sets on the cluster for distribute and meshpilot does not yet, so
// Envoy gets the left-out localities but not the shares.
func (p *localityPlan) distribute(groups []*localityGroup) []*localityGroup {
	if p.weights == nil {
		return groups
	}
	matched := make(map[*localityGroup]bool, len(groups))
	for _, pattern := range slices.Sorted(maps.Keys(p.weights)) {
		var dest []*localityGroup
		var total uint32
		for _, g := range groups {
			if matched[g] || !localityOf(g).Matches(pattern) {
				continue
			}
			matched[g] = true
			if g.healthy > 0 {
				dest = append(dest, g)
				total += g.healthy
			}
		}
		for _, g := range dest {
			share := uint64(g.healthy) * uint64(p.weights[pattern])
			g.distributed = uint32((share + uint64(total) - 1) / uint64(total))
		}
	}
	return slices.DeleteFunc(groups, func(g *localityGroup) bool { return !matched[g] })
}

func localityOf(g *localityGroup) model.Locality {
	l := g.lle.GetLocality()
	return model.Locality{Region: l.GetRegion(), Zone: l.GetZone(), Subzone: l.GetSubZone()}
}

// localityFor plans a locality setting (the cluster's rule's, else the
// mesh's) for one client's assignment of a cluster whose policy is
// given. Failover applies only to a cluster with outlier detection.
// Failover changes nothing when every endpoint is in one locality (all
// get one priority, whoever the client): only endpoints spread over
// several make the result vary by the client's locality, so that the
// common case stays one resource for every client.
func localityFor(c *Client, s *model.LocalityLB, policy model.TrafficPolicy, eps []*model.Endpoint) (localityPlan, Vary) {
	loc, needsRule := planLocality(s, c)
	if !needsRule {
		return loc, loc.vary
	}
	if len(eps) == 0 || policy.OutlierDetection == nil {
		return localityPlan{}, 0
	}
	first := eps[0].Locality
	if !slices.ContainsFunc(eps, func(ep *model.Endpoint) bool { return ep.Locality != first }) {
		return localityPlan{}, 0
	}
	return loc, VaryLocality
}
