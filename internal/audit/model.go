package audit

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// serviceFields are the fields of a service compared one by one, named
// as /debug/registryz names them.
var serviceFields = []field[*model.Service]{
	{"name", func(s *model.Service) any { return s.Name }},
	{"namespace", func(s *model.Service) any { return s.Namespace }},
	{"ports", func(s *model.Service) any { return s.Ports }},
	{"resolution", func(s *model.Service) any { return s.Resolution }},
	{"clusterIPs", func(s *model.Service) any { return s.ClusterIPs }},
	{"externalName", func(s *model.Service) any { return s.ExternalName }},
	{"labels", func(s *model.Service) any { return s.Labels }},
	{"internalTrafficPolicy", func(s *model.Service) any { return s.InternalTrafficPolicy }},
	{"trafficDistribution", func(s *model.Service) any { return s.TrafficDistribution }},
	{"selector", func(s *model.Service) any { return s.Selector }},
	{"meshExternal", func(s *model.Service) any { return s.MeshExternal }},
	{"exportTo", func(s *model.Service) any { return s.ExportTo }},
}

// endpointFields are the fields of an endpoint compared one by one, named
// as /debug/endpointz names them; the address identifies it within a
// service port.
var endpointFields = []field[*model.Endpoint]{
	{"port", func(e *model.Endpoint) any { return e.Port }},
	{"health", func(e *model.Endpoint) any { return e.Health }},
	{"locality", func(e *model.Endpoint) any { return e.Locality.String() }},
	{"labels", func(e *model.Endpoint) any { return e.Labels }},
	{"namespace", func(e *model.Endpoint) any { return e.Namespace }},
	{"podName", func(e *model.Endpoint) any { return e.PodName }},
	{"nodeName", func(e *model.Endpoint) any { return e.NodeName }},
	{"serviceAccount", func(e *model.Endpoint) any { return e.ServiceAccount }},
	{"weight", func(e *model.Endpoint) any { return e.Weight }},
	{"network", func(e *model.Endpoint) any { return e.Network }},
	{"clusterID", func(e *model.Endpoint) any { return e.ClusterID }},
}

// compareModels compares meshpilot's model (live) with one rebuilt from a
// LIST: services field by field, then the endpoints of each service port,
// matched by address, field by field.
func compareModels(live, rebuilt model.ServiceDiscovery) []Difference {
	var out []Difference
	liveSvcs, rebuiltSvcs := byHostname(live.Services()), byHostname(rebuilt.Services())
	hosts := slices.Sorted(maps.Keys(liveSvcs))
	for h := range rebuiltSvcs {
		if _, ok := liveSvcs[h]; !ok {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		ls, rs := liveSvcs[h], rebuiltSvcs[h]
		ref := serviceRef{}
		if s := cmp.Or(rs, ls); s != nil {
			ref = serviceRef{s.Namespace, s.Name}
		}
		add := func(kind, obj, field, cache, list string) {
			out = append(out, Difference{Kind: kind, Object: obj, Field: field, Cache: cache, List: list, service: ref})
		}
		switch {
		case ls == nil:
			add(KindModelService, string(h), "", absent, "present")
			continue
		case rs == nil:
			add(KindModelService, string(h), "", "present", absent)
			continue
		}
		if !ls.Equal(rs) {
			for _, f := range compareFields(serviceFields, ls, rs) {
				add(KindModelService, string(h), f.name, f.cache, f.list)
			}
		}
		for _, p := range servicePorts(ls, rs) {
			obj := fmt.Sprintf("%s:%d", h, p.Port)
			le := byAddress(live.EndpointsByPortName(h, p.Name, nil))
			re := byAddress(rebuilt.EndpointsByPortName(h, p.Name, nil))
			for _, addr := range unionKeys(le, re) {
				l, r := le[addr], re[addr]
				switch {
				case l == nil:
					add(KindModelEndpoint, obj, "endpoint "+addr, absent, "present")
				case r == nil:
					add(KindModelEndpoint, obj, "endpoint "+addr, "present", absent)
				case !l.Equal(r):
					for _, f := range compareFields(endpointFields, l, r) {
						add(KindModelEndpoint, obj, "endpoint "+addr+" "+f.name, f.cache, f.list)
					}
				}
			}
		}
	}
	return out
}

func byHostname(svcs []*model.Service) map[model.Hostname]*model.Service {
	m := make(map[model.Hostname]*model.Service, len(svcs))
	for _, s := range svcs {
		m[s.Hostname] = s
	}
	return m
}

// byAddress keys the endpoints of one service port by address, which is
// unique there (kubeconv.BuildEndpoints keeps one per port and address).
func byAddress(eps []*model.Endpoint) map[string]*model.Endpoint {
	m := make(map[string]*model.Endpoint, len(eps))
	for _, e := range eps {
		m[e.Address] = e
	}
	return m
}

// servicePorts lists the ports of either side once, by name: the
// endpoints of a port one side lacks all differ.
func servicePorts(a, b *model.Service) []model.Port {
	out := slices.Clone(a.Ports)
	for _, p := range b.Ports {
		if !slices.ContainsFunc(out, func(q model.Port) bool { return q.Name == p.Name }) {
			out = append(out, p)
		}
	}
	return out
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
