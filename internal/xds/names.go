package xds

import (
	"strconv"
	"strings"

	"github.com/meshpilot/meshpilot/internal/model"
)

// ClusterName is the name of the cluster, route configuration and
// ClusterLoadAssignment of a service port: "outbound|<port>||<FQDN>".
func ClusterName(host model.Hostname, port int32) string {
	return "outbound|" + strconv.Itoa(int(port)) + "||" + string(host)
}

// ParseClusterName reads a name made by ClusterName.
func ParseClusterName(name string) (host model.Hostname, port int32, ok bool) {
	rest, found := strings.CutPrefix(name, "outbound|")
	if !found {
		return "", 0, false
	}
	portStr, rest, found := strings.Cut(rest, "|")
	if !found {
		return "", 0, false
	}
	subset, h, found := strings.Cut(rest, "|")
	if !found || subset != "" || h == "" {
		return "", 0, false
	}
	p, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, false
	}
	return model.Hostname(h), int32(p), true
}

// splitHostPort splits a listener name "<host>:<port>".
func splitHostPort(name string) (host string, port int32, ok bool) {
	i := strings.LastIndexByte(name, ':')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, false
	}
	return name[:i], int32(p), true
}

// listenerKey is the first DNS label of a listener name's host: every
// form a client may use for a service (name, name.ns, name.ns.svc, FQDN)
// starts with the same label, so watches indexed by it can be found from
// a changed hostname.
func listenerKey(name string) string {
	host, _, ok := splitHostPort(name)
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
	host, port, ok := splitHostPort(name)
	if !ok {
		return nil, 0
	}
	for _, cand := range listenerCandidates(suffix, namespace, host) {
		svc := d.GetService(model.Hostname(cand))
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

func listenerCandidates(suffix, namespace, host string) []string {
	out := []string{host}
	switch strings.Count(host, ".") {
	case 0:
		if namespace != "" {
			out = append(out, host+"."+namespace+".svc."+suffix)
		}
	case 1:
		out = append(out, host+".svc."+suffix)
	case 2:
		if strings.HasSuffix(host, ".svc") {
			out = append(out, host+"."+suffix)
		}
	}
	return out
}

// hostForms lists the names a client may use for a service in a virtual
// host's domains: FQDN, and for "<name>.<ns>.svc.<suffix>" hostnames the
// relative forms, each with and without the port.
func hostForms(svc *model.Service, suffix string, port int32) []string {
	hosts := []string{string(svc.Hostname)}
	if string(svc.Hostname) == svc.Name+"."+svc.Namespace+".svc."+suffix {
		hosts = append(hosts, svc.Name, svc.Name+"."+svc.Namespace, svc.Name+"."+svc.Namespace+".svc")
	}
	p := ":" + strconv.Itoa(int(port))
	out := make([]string, 0, 2*len(hosts))
	for _, h := range hosts {
		out = append(out, h, h+p)
	}
	return out
}
