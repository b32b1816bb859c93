package model

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The names below are the xDS naming contract that clients written for
// Istio rely on: they must be built and read in one place so that a
// registry, the xDS server and a bootstrap never disagree on them.

// DefaultDomainSuffix is Kubernetes' default cluster domain, the one that
// ends every service hostname unless configured otherwise.
const DefaultDomainSuffix = "cluster.local"

// DomainSuffixOrDefault returns s, or DefaultDomainSuffix when s is empty,
// so that a forgotten setting still yields the names clients use rather
// than ones ending in a dot.
func DomainSuffixOrDefault(s string) string {
	if s == "" {
		return DefaultDomainSuffix
	}
	return s
}

// ServiceHostname returns a Kubernetes service's hostname,
// "<name>.<namespace>.svc.<domainSuffix>"; an empty suffix means
// DefaultDomainSuffix.
func ServiceHostname(name, namespace, domainSuffix string) Hostname {
	return Hostname(name + "." + namespace + ".svc." + DomainSuffixOrDefault(domainSuffix))
}

// outboundPrefix starts every cluster name; Istio's inbound clusters
// ("inbound|...") are a sidecar's, which proxyless clients never ask for.
const outboundPrefix = "outbound|"

// ClusterKey is what a cluster name designates: a service port, and a
// subset of its endpoints when Subset is not empty.
type ClusterKey struct {
	Port   int32
	Subset string
	Host   Hostname
}

// ClusterName is the name of the cluster, route configuration and
// ClusterLoadAssignment of a service port, Istio's
// "outbound|<port>|<subset>|<FQDN>"; the subset is empty for the whole
// service.
func ClusterName(port int32, subset string, host Hostname) string {
	return outboundPrefix + strconv.Itoa(int(port)) + "|" + subset + "|" + string(host)
}

// ParseClusterName reads a name made by ClusterName. It reports false for
// any other direction than outbound, a port outside 1-65535, or an empty
// host.
func ParseClusterName(name string) (ClusterKey, bool) {
	rest, found := strings.CutPrefix(name, outboundPrefix)
	if !found {
		return ClusterKey{}, false
	}
	portStr, rest, found := strings.Cut(rest, "|")
	if !found {
		return ClusterKey{}, false
	}
	subset, host, found := strings.Cut(rest, "|")
	if !found || host == "" {
		return ClusterKey{}, false
	}
	port, ok := parsePort(portStr)
	if !ok {
		return ClusterKey{}, false
	}
	return ClusterKey{Port: port, Subset: subset, Host: Hostname(host)}, true
}

// parsePort reads a decimal TCP/UDP port number, 1 to 65535.
func parsePort(s string) (int32, bool) {
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p <= 0 || p > 65535 {
		return 0, false
	}
	return int32(p), true
}

// SplitHostPort splits a client listener name "<host>:<port>", the form
// gRPC clients ask for from an "xds:///<host>:<port>" target.
func SplitHostPort(name string) (host string, port int32, ok bool) {
	i := strings.LastIndexByte(name, ':')
	if i <= 0 {
		return "", 0, false
	}
	port, ok = parsePort(name[i+1:])
	if !ok {
		return "", 0, false
	}
	return name[:i], port, true
}

// HostnameCandidates lists, in the order they are tried, the hostnames a
// listener host may designate for a client in namespace: the host itself,
// then the FQDN of the Kubernetes short forms "<name>" (in the client's
// namespace; none when it is unknown), "<name>.<namespace>" and
// "<name>.<namespace>.svc", as Kubernetes DNS search paths resolve them.
func HostnameCandidates(host, namespace, domainSuffix string) []Hostname {
	suffix := DomainSuffixOrDefault(domainSuffix)
	out := []Hostname{Hostname(host)}
	switch strings.Count(host, ".") {
	case 0:
		if namespace != "" {
			out = append(out, ServiceHostname(host, namespace, suffix))
		}
	case 1:
		out = append(out, Hostname(host+".svc."+suffix))
	case 2:
		if strings.HasSuffix(host, ".svc") {
			out = append(out, Hostname(host+"."+suffix))
		}
	}
	return out
}

// VirtualHostDomains lists the names a client may use for a service port
// in a virtual host's domains: the FQDN, and for Kubernetes hostnames
// "<name>.<ns>.svc.<suffix>" the short forms, each with and without the
// port.
func VirtualHostDomains(svc *Service, domainSuffix string, port int32) []string {
	hosts := []string{string(svc.Hostname)}
	if svc.Hostname == ServiceHostname(svc.Name, svc.Namespace, domainSuffix) {
		hosts = append(hosts, svc.Name, svc.Name+"."+svc.Namespace, svc.Name+"."+svc.Namespace+".svc")
	}
	p := ":" + strconv.Itoa(int(port))
	out := make([]string, 0, 2*len(hosts))
	for _, h := range hosts {
		out = append(out, h, h+p)
	}
	return out
}

// InboundListenerPrefix starts the listener name under which a gRPC xDS
// server asks for its configuration (gRFC A36), as Istio names it; the
// bootstrap's server_listener_resource_name_template is this prefix and
// "%s", which grpc-go fills with the address it listens on.
const InboundListenerPrefix = "xds.istio.io/grpc/lds/inbound/"

// InboundListenerName returns the inbound listener name of a server
// listening on hostPort ("10.0.0.7:8080", "0.0.0.0:8080", "[::]:8080").
func InboundListenerName(hostPort string) string {
	return InboundListenerPrefix + hostPort
}

// ParseInboundListenerName reads a name made by InboundListenerName. The
// host is an IP address (IPv6 without its brackets), any address included:
// a server listening on all interfaces asks with "0.0.0.0" or "[::]".
func ParseInboundListenerName(name string) (host string, port int32, ok bool) {
	hostPort, found := strings.CutPrefix(name, InboundListenerPrefix)
	if !found {
		return "", 0, false
	}
	h, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", 0, false
	}
	if _, err := netip.ParseAddr(h); err != nil {
		return "", 0, false
	}
	port, ok = parsePort(p)
	if !ok {
		return "", 0, false
	}
	return h, port, true
}
