package xds

import (
	"strings"

	"github.com/meshpilot/meshpilot/internal/model"
)

// serviceCluster reads a cluster name that designates a whole service
// port. A name with a subset designates nothing until subsets
// (DestinationRule) are served.
func serviceCluster(name string) (host model.Hostname, port int32, ok bool) {
	k, ok := model.ParseClusterName(name)
	if !ok || k.Subset != "" {
		return "", 0, false
	}
	return k.Host, k.Port, true
}

// listenerKey is the first DNS label of a listener name's host: every
// form a client may use for a service (name, name.ns, name.ns.svc, FQDN)
// starts with the same label, so watches indexed by it can be found from
// a changed hostname.
func listenerKey(name string) string {
	host, _, ok := model.SplitHostPort(name)
	if !ok {
		host = name
	}
	label, _, _ := strings.Cut(host, ".")
	return label
}

// hostKey is the first label of a hostname (see listenerKey).
func hostKey(h model.Hostname) string {
	label, _, _ := strings.Cut(string(h), ".")
	return label
}

// resolveListener maps a listener name a client asked for to the service
// and port it designates, relative to the client's namespace. Forms:
// "<FQDN>:<port>", "<name>:<port>", "<name>.<namespace>:<port>",
// "<name>.<namespace>.svc:<port>". It returns nil when the name designates
// no service port.
func resolveListener(d model.ServiceDiscovery, suffix, namespace, name string) (*model.Service, int32) {
	host, port, ok := model.SplitHostPort(name)
	if !ok {
		return nil, 0
	}
	for _, cand := range model.HostnameCandidates(host, namespace, suffix) {
		svc := d.GetService(cand)
		if svc == nil {
			continue
		}
		if _, ok := svc.PortByNumber(port); ok {
			return svc, port
		}
		return nil, 0
	}
	return nil, 0
}
