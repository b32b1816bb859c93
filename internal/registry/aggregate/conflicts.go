package aggregate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshpilot/meshpilot/internal/model"
)

// PortConflict is a hostname that several sources define with ports that
// differ in number, name or protocol: a Service of one name and
// namespace in several clusters whose ports were not kept alike. Only
// the first definition is served (see the package doc), so clients see
// its ports, and another source's endpoints join a served port only
// where that source names it alike.
type PortConflict struct {
	Hostname model.Hostname
	// Definitions are every source's definition of the hostname, by
	// precedence: the first is the one served. Their Ports are the
	// sources' own slices: do not modify them.
	Definitions []Definition
}

// Definition is the ports one source gives a hostname.
type Definition struct {
	Source string
	Ports  []model.Port
}

// PortConflicts lists the hostnames whose sources' definitions differ in
// their ports, ordered by hostname. It is computed on each call, for the
// debug page, never on the push path: every source but the first lists
// its services once, each asking the sources before it for the
// hostname (O(services × sources) map lookups and a map of the
// hostnames defined twice). With a single source there is none, at no
// cost.
func (a *Controller) PortConflicts() []PortConflict {
	v := a.view.Load()
	if v.single != nil {
		return nil
	}
	twice := map[model.Hostname]bool{}
	for i, s := range v.sources[1:] {
		for _, svc := range s.Controller.Services() {
			if twice[svc.Hostname] {
				continue
			}
			for _, earlier := range v.sources[:i+1] {
				if earlier.Controller.GetService(svc.Hostname) != nil {
					twice[svc.Hostname] = true
					break
				}
			}
		}
	}
	var out []PortConflict
	for _, h := range slices.Sorted(maps.Keys(twice)) {
		if c, ok := v.portConflict(h); ok {
			out = append(out, c)
		}
	}
	return out
}

// portConflict returns the conflict of one hostname, if its definitions
// differ. Without one it allocates nothing: one GetService per source.
func (v *view) portConflict(h model.Hostname) (PortConflict, bool) {
	if v.single != nil {
		return PortConflict{}, false
	}
	first, differ := -1, false
	var served *model.Service
	for i, s := range v.sources {
		svc := s.Controller.GetService(h)
		switch {
		case svc == nil:
		case served == nil:
			first, served = i, svc
		case !samePorts(served.Ports, svc.Ports):
			differ = true
		}
		if differ {
			break
		}
	}
	if !differ {
		return PortConflict{}, false
	}
	c := PortConflict{Hostname: h}
	for _, s := range v.sources[first:] {
		if svc := s.Controller.GetService(h); svc != nil {
			c.Definitions = append(c.Definitions, Definition{Source: s.Name, Ports: svc.Ports})
		}
	}
	// A definition gone between the two passes leaves one: no conflict.
	return c, len(c.Definitions) > 1
}

// samePorts reports whether two definitions have the same ports, in any
// order. Target ports are not compared: they are each cluster's
// workloads' own, and clients never see them.
func samePorts(a, b []model.Port) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.ContainsFunc(b, func(q model.Port) bool {
			return q.Name == p.Name && q.Port == p.Port && q.Protocol == p.Protocol
		}) {
			return false
		}
	}
	return true
}

// Why says in words how the definitions differ and what is served, each
// source named by label (SourceLabel, say).
func (c PortConflict) Why(label func(source string) string) string {
	if len(c.Definitions) < 2 {
		return ""
	}
	served := c.Definitions[0]
	var diffs []string
	for _, d := range c.Definitions[1:] {
		diffs = append(diffs, portDifferences(served, d, label)...)
	}
	return fmt.Sprintf("ports differ; the first definition, %s's, is served: %s", label(served.Source), strings.Join(diffs, "; "))
}

// portDifferences lists how other's ports differ from the served ones
// and what that does. Endpoints join a served port by its name (see the
// package doc), so a port named otherwise in other gets none of other's
// endpoints.
func portDifferences(served, other Definition, label func(string) string) []string {
	s, o := label(served.Source), label(other.Source)
	var out []string
	for _, p := range served.Ports {
		if q, ok := portNamed(other.Ports, p.Name); ok {
			if q.Port != p.Port {
				out = append(out, fmt.Sprintf("port %q is %d in %s, %d in %s: %d is served, with %s's endpoints", p.Name, p.Port, s, q.Port, o, p.Port, o))
			}
			if q.Protocol != p.Protocol {
				out = append(out, fmt.Sprintf("port %q is %s in %s, %s in %s: %s is served", p.Name, p.Protocol, s, q.Protocol, o, p.Protocol))
			}
			continue
		}
		if q, ok := portNumbered(other.Ports, p.Port); ok {
			out = append(out, fmt.Sprintf("port %d is named %q in %s, %q in %s: none of %s's endpoints serve it", p.Port, p.Name, s, q.Name, o, o))
			continue
		}
		out = append(out, fmt.Sprintf("port %d (%q) is not in %s: none of its endpoints serve it", p.Port, p.Name, o))
	}
	for _, q := range other.Ports {
		if _, ok := portNamed(served.Ports, q.Name); ok {
			continue
		}
		if sp, ok := portNumbered(served.Ports, q.Port); ok {
			if _, named := portNamed(other.Ports, sp.Name); !named {
				continue // said above, from the served port of that number
			}
		}
		out = append(out, fmt.Sprintf("port %d (%q) of %s is not served", q.Port, q.Name, o))
	}
	return out
}

func portNamed(ports []model.Port, name string) (model.Port, bool) {
	i := slices.IndexFunc(ports, func(p model.Port) bool { return p.Name == name })
	if i < 0 {
		return model.Port{}, false
	}
	return ports[i], true
}

// portNumbered finds a port of that number; of kube-dns's 53/UDP and
// 53/TCP, the first listed.
func portNumbered(ports []model.Port, number int32) (model.Port, bool) {
	i := slices.IndexFunc(ports, func(p model.Port) bool { return p.Port == number })
	if i < 0 {
		return model.Port{}, false
	}
	return ports[i], true
}
