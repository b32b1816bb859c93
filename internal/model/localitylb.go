package model

import "strings"

// LocalityLB is MeshConfig's localityLbSetting (Istio's
// LocalityLoadBalancerSetting): how a client's traffic is spread over the
// localities of a service's endpoints, relative to the client's own.
// Istio's default mesh enables it with nothing else set, which is what a
// nil *LocalityLB means: then, for a cluster with outlier detection, the
// endpoints closest to the client come first (applyLocalityFailover).
type LocalityLB struct {
	// Disabled is enabled: false: no locality load balancing.
	Disabled bool
	// Distribute (exclusive with Failover) sets, for clients of a
	// locality, each destination locality's share of traffic.
	Distribute []LocalityDistribute
	// Failover names, for clients of a region, the region to fail over
	// to before any other.
	Failover []LocalityFailover
	// FailoverPriority is failoverPriority: labels that order endpoints
	// by how many of them match the client's.
	FailoverPriority []string
}

// LocalityDistribute is one distribute entry: clients whose locality
// matches From ("region/zone/subzone", "*" for any part, trailing parts
// optional) send To[locality pattern] percent of their traffic there.
type LocalityDistribute struct {
	From string
	To   map[string]uint32
}

// LocalityFailover is one failover entry, regions only.
type LocalityFailover struct {
	From, To string
}

// Matches reports whether l matches a locality pattern as Istio's
// LocalityMatch does: "region/zone/subzone", a part "*" or missing
// (zone, subzone) matching anything.
func (l Locality) Matches(pattern string) bool {
	region, rest, _ := strings.Cut(pattern, "/")
	zone, subzone, _ := strings.Cut(rest, "/")
	return (region == "*" || region == l.Region) &&
		(zone == "*" || zone == "" || zone == l.Zone) &&
		(subzone == "*" || subzone == "" || subzone == l.Subzone)
}
