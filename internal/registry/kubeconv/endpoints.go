package kubeconv

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// EndpointHealth: ready (nil counts as ready) is Healthy; not ready but
// serving and terminating is Draining; anything else is Unhealthy. Nil
// serving counts as serving and nil terminating as not terminating, as the
// EndpointSlice API defines them.
func EndpointHealth(c discoveryv1.EndpointConditions) model.Health {
	if c.Ready == nil || *c.Ready {
		return model.Healthy
	}
	serving := c.Serving == nil || *c.Serving
	terminating := c.Terminating != nil && *c.Terminating
	if serving && terminating {
		return model.Draining
	}
	return model.Unhealthy
}

// healthRank orders health from best to worst without relying on the
// numeric values of the model's constants.
func healthRank(h model.Health) int {
	switch h {
	case model.Healthy:
		return 0
	case model.Draining:
		return 1
	}
	return 2
}

// EndpointLookup finds the objects an endpoint refers to. Any func may be
// nil; any may return nil.
type EndpointLookup struct {
	Pod func(namespace, name string) *PodInfo
	// PodByIP returns PodForIP's choice among the Pods that hold ip.
	PodByIP func(namespace, ip string) *PodInfo
	Node    func(name string) *corev1.Node
	// ClusterID is written on every endpoint built (model.Endpoint
	// ClusterID): the cluster the objects come from, empty for the
	// local one.
	ClusterID string
	// LocalClusterID is the local cluster's ID, which the label
	// topology.istio.io/cluster gives the local cluster's endpoints
	// (ClusterID empty); model.DefaultClusterID when empty.
	LocalClusterID string
}

// podFor finds the Pod behind one address of a slice endpoint. A targetRef
// is trusted over the IP: IPs are reused quickly, so a Pod found by IP
// counts only if it is the one the targetRef names, and a targetRef to
// something other than a Pod means no Pod is behind the address.
func (l EndpointLookup) podFor(ref *corev1.ObjectReference, namespace, address string) *PodInfo {
	if ref != nil {
		if ref.Kind != "Pod" {
			return nil
		}
		ns := cmp.Or(ref.Namespace, namespace)
		if l.Pod != nil {
			if pod := l.Pod(ns, ref.Name); pod != nil {
				return pod
			}
		}
		if l.PodByIP != nil {
			if pod := l.PodByIP(ns, address); pod != nil && pod.Name == ref.Name {
				return pod
			}
		}
		return nil
	}
	if l.PodByIP != nil {
		return l.PodByIP(namespace, address)
	}
	return nil
}

func (l EndpointLookup) node(name string) *corev1.Node {
	if name == "" || l.Node == nil {
		return nil
	}
	return l.Node(name)
}

type matchedSlicePort struct {
	name   string
	number int32
	// stale: the service port's numeric targetPort is another number, so
	// the slice was written for an older spec of the Service.
	stale bool
}

// BuildEndpoints builds the endpoints of svc from all of its
// EndpointSlices (the caller selects them, normally by the
// kubernetes.io/service-name label). The result is sorted by
// (ServicePortName, Address, Port) and does not depend on the order of
// slices.
//
// During a rollout, a slice rebalance or after a change of the Service's
// targetPort, one address briefly appears in two slices, possibly on two
// target ports. As in Istio, each (Address, ServicePortName) is kept once,
// so that a stale slice cannot leave a second copy on an old port. Istio
// keeps an arbitrary copy; here the copy kept is, in order of preference:
// on the port the Service's numeric targetPort names (the other was
// written for an older spec), the healthiest, from the newest slice (by
// creation time), from the first slice by name.
//
// The endpoints of one call are allocated as one block, and those for the
// ports of one address share their Labels map: a service's endpoints are
// replaced together, and the model never mutates them.
//
// An ExternalName service has no endpoints of its own: clients resolve the
// name it points to.
func BuildEndpoints(svc *model.Service, endpointSlices []*discoveryv1.EndpointSlice, lookup EndpointLookup) []*model.Endpoint {
	if svc == nil || svc.Resolution == model.DNSAlias || len(svc.Ports) == 0 {
		return nil
	}
	ordered := sortedSlices(endpointSlices)

	// An upper bound, so that the block is never reallocated.
	n := 0
	for _, s := range ordered {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		perAddress := min(len(s.Ports), len(svc.Ports))
		for i := range s.Endpoints {
			n += len(s.Endpoints[i].Addresses) * perAddress
		}
	}
	if n == 0 {
		return nil
	}

	block := make([]model.Endpoint, 0, n)
	// rank[i] orders the copies of block[i]'s key, lowest kept.
	rank := make([]uint8, 0, n)
	var ports []matchedSlicePort // reused across slices
	for _, s := range ordered {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports = matchSlicePorts(ports[:0], svc, s.Ports)
		if len(ports) == 0 {
			continue
		}
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			health := EndpointHealth(e.Conditions)
			for _, addr := range e.Addresses {
				base := describeEndpoint(svc, s, e, addr, health, lookup)
				for _, p := range ports {
					base.Port = uint32(p.number)
					base.ServicePortName = p.name
					block = append(block, base)
					rank = append(rank, copyRank(p.stale, health))
				}
			}
		}
	}

	// Sorting indices, with the index as the last key, keeps the order of
	// slices among equally ranked duplicates without a stable sort: the
	// first of each run is the one to keep.
	order := make([]int32, len(block))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		return cmp.Or(
			compareEndpointKey(&block[i], &block[j]),
			cmp.Compare(rank[i], rank[j]),
			cmp.Compare(i, j),
		)
	})
	out := make([]*model.Endpoint, 0, len(block))
	for _, i := range order {
		ep := &block[i]
		if len(out) > 0 && compareEndpointKey(out[len(out)-1], ep) == 0 {
			continue
		}
		out = append(out, ep)
	}
	return out
}

// copyRank orders copies of one endpoint: any copy on the Service's
// target port before a stale one, then by health.
func copyRank(stale bool, h model.Health) uint8 {
	r := uint8(healthRank(h))
	if stale {
		r += 4
	}
	return r
}

// compareEndpointKey compares what makes endpoints duplicates: (service
// port name, address). It uses strings.Compare, one pass over the bytes
// where cmp.Compare may take two: sorting is a large part of
// BuildEndpoints.
func compareEndpointKey(a, b *model.Endpoint) int {
	if c := strings.Compare(a.ServicePortName, b.ServicePortName); c != 0 {
		return c
	}
	return strings.Compare(a.Address, b.Address)
}

// sortedSlices orders slices newest first (by creation time), then by
// namespace and name, so that ties between duplicates are broken the same
// way whatever order the lister returned.
func sortedSlices(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int {
		return cmp.Or(
			b.CreationTimestamp.Compare(a.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name))
	})
	return out
}

// matchSlicePorts appends the slice ports that serve a port of svc. Slice
// ports carry the service port's name (nil for an unnamed port) and the
// resolved workload port.
func matchSlicePorts(dst []matchedSlicePort, svc *model.Service, ports []discoveryv1.EndpointPort) []matchedSlicePort {
	for _, sp := range ports {
		if sp.Port == nil {
			// The slice controller leaves the number unset when a named
			// target port cannot be resolved; there is nothing to dial.
			continue
		}
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		for _, p := range svc.Ports {
			if p.Name == name {
				stale := p.TargetPort != 0 && p.TargetPort != *sp.Port
				dst = append(dst, matchedSlicePort{name: name, number: *sp.Port, stale: stale})
				break
			}
		}
	}
	return dst
}

func describeEndpoint(svc *model.Service, s *discoveryv1.EndpointSlice, e *discoveryv1.Endpoint,
	addr string, health model.Health, lookup EndpointLookup,
) model.Endpoint {
	ns := cmp.Or(s.Namespace, svc.Namespace)
	pod := lookup.podFor(e.TargetRef, ns, addr)

	out := model.Endpoint{Address: addr, Health: health, Namespace: svc.Namespace, ClusterID: lookup.ClusterID}
	if pod != nil {
		out.PodName = pod.Name
		out.NodeName = pod.NodeName
		out.ServiceAccount = pod.ServiceAccount
	} else if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
		out.PodName = e.TargetRef.Name
	}
	if out.NodeName == "" && e.NodeName != nil {
		out.NodeName = *e.NodeName
	}

	var node *corev1.Node
	if podLocalityLabel(pod) == "" {
		node = lookup.node(out.NodeName)
	}
	out.Locality = Locality(pod, node, e.Zone)
	out.Labels = endpointLabels(pod, Topology{
		Locality: out.Locality,
		Cluster:  cmp.Or(lookup.ClusterID, lookup.LocalClusterID, model.DefaultClusterID),
		Node:     out.NodeName,
	})
	return out
}
