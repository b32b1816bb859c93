package model

import (
	"slices"
	"strings"
)

// ServiceSettings is one entry of MeshConfig's serviceSettings: settings
// for the services whose hostname matches one of Hosts.
type ServiceSettings struct {
	// Hosts are exact hostnames, wildcards ("*.ns.svc.cluster.local")
	// or "*" (every host).
	Hosts []Hostname
	// ClusterLocal says that traffic to those hosts stays within the
	// cluster of its client.
	ClusterLocal bool
}

// ClusterLocalHost is one line of the table that says which hosts are
// cluster-local.
type ClusterLocalHost struct {
	// Host is an exact hostname or a wildcard ("*.ns.svc.cluster.local",
	// "*").
	Host         Hostname `json:"host"`
	ClusterLocal bool     `json:"clusterLocal"`
	// Default marks one of Istio's defaults, which a setting overrides.
	Default bool `json:"default,omitempty"`
}

// ClusterLocalHosts is the table, most specific line first: exact
// hostnames, then wildcards from the longest (Istio's host ordering,
// host.MoreSpecific). A host's line is the first that matches it.
type ClusterLocalHosts []ClusterLocalHost

// clusterLocalDefaults are Istio's cluster-local hosts for a domain
// suffix: every service of kube-system, and the API server's service.
// Istio adds its own discovery address (MeshConfig
// defaultConfig.discoveryAddress, which meshpilot does not apply).
func clusterLocalDefaults(suffix string) []Hostname {
	return []Hostname{Hostname("*.kube-system.svc." + suffix), Hostname("kubernetes.default.svc." + suffix)}
}

// ClusterLocalHosts returns the table in force for services named under
// domainSuffix ("cluster.local" when empty), as Istio builds it
// (pilot/pkg/model/cluster_local.go): the settings' hosts, a later
// setting of a host replacing an earlier one, and Istio's defaults. A
// host set not cluster-local removes a default it equals or, for a
// wildcard default, ends with: as in Istio, making one kube-system
// service global makes the others global too unless a setting says
// otherwise.
func (m *MeshSettings) ClusterLocalHosts(domainSuffix string) ClusterLocalHosts {
	if domainSuffix == "" {
		domainSuffix = "cluster.local"
	}
	defaults := clusterLocalDefaults(domainSuffix)
	set := map[Hostname]bool{}
	for _, s := range m.ServiceSettings {
		for _, h := range s.Hosts {
			set[h] = s.ClusterLocal
			if s.ClusterLocal {
				continue
			}
			defaults = slices.DeleteFunc(defaults, func(d Hostname) bool {
				return h == d || isWildcard(d) && strings.HasSuffix(string(h), string(d[1:]))
			})
		}
	}
	out := make(ClusterLocalHosts, 0, len(set)+len(defaults))
	for h, local := range set {
		out = append(out, ClusterLocalHost{Host: h, ClusterLocal: local})
	}
	for _, d := range defaults {
		if _, ok := set[d]; !ok {
			out = append(out, ClusterLocalHost{Host: d, ClusterLocal: true, Default: true})
		}
	}
	slices.SortFunc(out, func(a, b ClusterLocalHost) int { return compareSpecific(a.Host, b.Host) })
	return out
}

// ClusterLocal reports whether traffic to host (a hostname or a
// wildcard) stays within its client's cluster: the most specific line
// that matches it says so, and a host no line matches is not.
func (m *MeshSettings) ClusterLocal(host Hostname, domainSuffix string) bool {
	return m.ClusterLocalHosts(domainSuffix).IsClusterLocal(host)
}

// IsClusterLocal is ClusterLocal over the table c. As in Istio
// (MostSpecificHostMatch), an exact hostname matches only itself, and a
// wildcard a hostname that ends with what follows its "*"; a wildcard
// host is matched by wildcards alone.
func (c ClusterLocalHosts) IsClusterLocal(host Hostname) bool {
	needle := string(host)
	if isWildcard(host) {
		needle = needle[1:]
	}
	for _, l := range c {
		switch {
		case isWildcard(l.Host):
			if strings.HasSuffix(needle, string(l.Host[1:])) {
				return l.ClusterLocal
			}
		case !isWildcard(host) && l.Host == host:
			return l.ClusterLocal
		}
	}
	return false
}

func isWildcard(h Hostname) bool { return strings.HasPrefix(string(h), "*") }

// compareSpecific orders hosts as Istio's host.MoreSpecific: exact names
// before wildcards, then longest first, then alphabetically.
func compareSpecific(a, b Hostname) int {
	if wa, wb := isWildcard(a), isWildcard(b); wa != wb {
		if wa {
			return 1
		}
		return -1
	}
	if len(a) != len(b) {
		return len(b) - len(a)
	}
	return strings.Compare(string(a), string(b))
}
