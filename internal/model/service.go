// Package model is meshpilot's platform-neutral service model: services,
// their ports and protocols, and the endpoints behind them. Registries
// (Kubernetes, files) write it; the xDS layer reads it. It imports neither
// Kubernetes nor Envoy types.
//
// Values handed out by the model (*Service, *Endpoint, *Workload) are
// immutable snapshots: a change replaces them, it never mutates them, so
// readers on any goroutine may keep and share them without locking.
package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Hostname is a service's fully qualified name, for example
// "reviews.default.svc.cluster.local".
type Hostname string

// Protocol is the application protocol of a service port, named as Istio
// names it.
type Protocol string

// The protocols a port may carry. Unsupported means "not known; detect it".
const (
	HTTP        Protocol = "HTTP"
	HTTP2       Protocol = "HTTP2"
	HTTPS       Protocol = "HTTPS"
	GRPC        Protocol = "GRPC"
	GRPCWeb     Protocol = "GRPC-Web"
	TCP         Protocol = "TCP"
	TLS         Protocol = "TLS"
	Mongo       Protocol = "Mongo"
	MySQL       Protocol = "MySQL"
	Redis       Protocol = "Redis"
	UDP         Protocol = "UDP"
	HTTPProxy   Protocol = "HTTP_PROXY"
	Unsupported Protocol = "UnsupportedProtocol"
)

// IsHTTP reports whether the protocol is carried over HTTP (1.1 or 2),
// which is what gRPC clients and Envoy's HTTP connection manager need.
func (p Protocol) IsHTTP() bool {
	switch p {
	case HTTP, HTTP2, GRPC, GRPCWeb, HTTPProxy:
		return true
	}
	return false
}

// Resolution says how a client reaches a service's endpoints.
type Resolution int

const (
	// ClientSideLB: the client picks among the service's endpoints.
	ClientSideLB Resolution = iota
	// Passthrough: a headless service; the client connects to the address
	// it was given, endpoints are still known.
	Passthrough
	// DNSAlias: the client resolves a DNS name itself: the ExternalName
	// (an ExternalName service, a DNS alias for another name; a DNS
	// ServiceEntry without endpoints, whose ExternalName is its own
	// host), else each endpoint's address (a DNS ServiceEntry with
	// endpoints, which may be names).
	DNSAlias
)

func (r Resolution) String() string {
	switch r {
	case ClientSideLB:
		return "ClientSideLB"
	case Passthrough:
		return "Passthrough"
	case DNSAlias:
		return "DNSAlias"
	}
	return "Unknown"
}

// MarshalText lets Resolution appear by name in JSON (debug endpoints).
func (r Resolution) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the name MarshalText writes.
func (r *Resolution) UnmarshalText(b []byte) error {
	for _, v := range []Resolution{ClientSideLB, Passthrough, DNSAlias} {
		if v.String() == string(b) {
			*r = v
			return nil
		}
	}
	return fmt.Errorf("unknown resolution %q", b)
}

// Port is one port of a service.
type Port struct {
	Name string `json:"name,omitempty"`
	// Port is the port clients connect to.
	Port int32 `json:"port"`
	// TargetPort is the workload's port when given as a number, else 0 and
	// TargetPortName names the container port.
	TargetPort     int32    `json:"targetPort,omitempty"`
	TargetPortName string   `json:"targetPortName,omitempty"`
	Protocol       Protocol `json:"protocol"`
}

// Service is one service of the mesh.
type Service struct {
	Hostname  Hostname `json:"hostname"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Ports     []Port   `json:"ports,omitempty"`
	// Resolution is ClientSideLB for ordinary services, Passthrough for
	// headless ones, DNSAlias for ExternalName.
	Resolution Resolution `json:"resolution"`
	// ClusterIPs holds the virtual IPs (one per IP family); empty when
	// headless or ExternalName. A ServiceEntry's addresses (IPs or
	// CIDRs) are kept here.
	ClusterIPs []string `json:"clusterIPs,omitempty"`
	// ExternalName is the DNS name a DNSAlias service points to.
	ExternalName string            `json:"externalName,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// InternalTrafficPolicy and TrafficDistribution make the endpoints a
	// client gets depend on where the client runs (Kubernetes
	// spec.internalTrafficPolicy and spec.trafficDistribution).
	InternalTrafficPolicy InternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	TrafficDistribution   TrafficDistribution   `json:"trafficDistribution,omitempty"`
	// Selector is a Kubernetes Service's spec.selector: the workloads
	// (WorkloadEntries too, as in Istio) of its namespace it selects.
	// Empty selects nothing.
	Selector Labels `json:"selector,omitempty"`
	// MeshExternal: a ServiceEntry with location MESH_EXTERNAL, a service
	// outside the mesh.
	MeshExternal bool `json:"meshExternal,omitempty"`
	// ExportTo lists the namespaces whose clients may see the service
	// (VisibleTo), as Istio writes them: a ServiceEntry's exportTo, a
	// Kubernetes Service's networking.istio.io/exportTo annotation. "*"
	// every namespace, "." the service's own, "~" none, other entries
	// namespace names; empty means every namespace.
	ExportTo []string `json:"exportTo,omitempty"`
	// ServiceAccounts are identities the service's workloads may present
	// beyond those of its endpoints, as written: a Kubernetes Service's
	// alpha.istio.io/canonical-serviceaccounts annotation, a
	// ServiceEntry's subjectAltNames. ISTIO_MUTUAL verifies them too, as
	// istiod's service accounts of a service hold them.
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// Others are other namespaces' definitions of the same host (see
	// WithDefinitions), which clients of some namespaces see instead of
	// this one (ForNamespace). Only ServiceEntries make them.
	Others []*Service `json:"others,omitempty"`

	// own holds the endpoints of a definition in another service's
	// Others (EndpointsOf).
	own *definitionEndpoints
}

// VisibleTo reports whether clients of namespace ns may see the service.
// One it hides is, for them, no service at all: no listener, route,
// cluster or endpoints, as in Istio.
func (s *Service) VisibleTo(ns string) bool {
	return visibleTo(s.ExportTo, s.Namespace, ns)
}

// ExportedToAll reports whether every client sees the service, so that
// what is built from it does not depend on the client's namespace.
func (s *Service) ExportedToAll() bool { return exportedToAll(s.ExportTo) }

// InternalTrafficPolicy says which endpoints serve a client in the mesh.
type InternalTrafficPolicy uint8

const (
	// InternalTrafficCluster: every endpoint (the Kubernetes default).
	InternalTrafficCluster InternalTrafficPolicy = iota
	// InternalTrafficLocal: only the endpoints on the client's node; a
	// client on a node without one gets none, as kube-proxy drops its
	// traffic.
	InternalTrafficLocal
)

func (p InternalTrafficPolicy) String() string {
	if p == InternalTrafficLocal {
		return "Local"
	}
	return "Cluster"
}

// MarshalText lets the policy appear by name in JSON.
func (p InternalTrafficPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads the name MarshalText writes: debug pages are read
// back (meshpilot status), and a name must not fail where a number would.
func (p *InternalTrafficPolicy) UnmarshalText(b []byte) error {
	for _, v := range []InternalTrafficPolicy{InternalTrafficCluster, InternalTrafficLocal} {
		if v.String() == string(b) {
			*p = v
			return nil
		}
	}
	return fmt.Errorf("unknown internal traffic policy %q", b)
}

// TrafficDistribution is a preference for endpoints close to the client:
// they are preferred (priority 0) while any is there, the others take over
// (priority 1) when none is.
type TrafficDistribution uint8

const (
	// TrafficDistributionAny: no preference.
	TrafficDistributionAny TrafficDistribution = iota
	// PreferSameZone: endpoints in the client's region and zone
	// (Kubernetes PreferSameZone, and PreferClose, its former name).
	PreferSameZone
	// PreferSameNode: endpoints on the client's node.
	PreferSameNode
)

func (d TrafficDistribution) String() string {
	switch d {
	case PreferSameZone:
		return "PreferSameZone"
	case PreferSameNode:
		return "PreferSameNode"
	}
	return ""
}

// MarshalText lets the preference appear by name in JSON.
func (d TrafficDistribution) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the name MarshalText writes ("" for no preference).
func (d *TrafficDistribution) UnmarshalText(b []byte) error {
	for _, v := range []TrafficDistribution{TrafficDistributionAny, PreferSameZone, PreferSameNode} {
		if v.String() == string(b) {
			*d = v
			return nil
		}
	}
	return fmt.Errorf("unknown traffic distribution %q", b)
}

// PortByNumber returns the port a number means: the first port with that
// number whose protocol is not UDP. Kubernetes lets one number carry two
// protocols (kube-dns has "dns" 53/UDP and "dns-tcp" 53/TCP), while the
// clusters and listeners meshpilot serves are TCP, so a UDP port is never
// what a number means, and a number used by UDP alone means no port.
// Istio's PortList.GetByPort follows the same rule. Everything that looks
// a port up by number (cluster and listener names, Endpoints) goes
// through here.
func (s *Service) PortByNumber(port int32) (Port, bool) {
	for _, p := range s.Ports {
		if p.Port == port && p.Protocol != UDP {
			return p, true
		}
	}
	return Port{}, false
}

// PortsByNumber lists, in the order of Ports, the port each number means
// (see PortByNumber): one per number, none for UDP. It is what clients can
// ask for by number, one cluster each.
func (s *Service) PortsByNumber() []Port {
	var out []Port
	for _, p := range s.Ports {
		if q, ok := s.PortByNumber(p.Port); ok && q.Name == p.Name {
			out = append(out, p)
		}
	}
	return out
}

// Equal reports whether two services carry the same content.
func (s *Service) Equal(o *Service) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Hostname == o.Hostname && s.Name == o.Name && s.Namespace == o.Namespace &&
		slices.Equal(s.Ports, o.Ports) && s.Resolution == o.Resolution &&
		slices.Equal(s.ClusterIPs, o.ClusterIPs) && s.ExternalName == o.ExternalName &&
		maps.Equal(s.Labels, o.Labels) && s.InternalTrafficPolicy == o.InternalTrafficPolicy &&
		s.TrafficDistribution == o.TrafficDistribution && maps.Equal(s.Selector, o.Selector) &&
		s.MeshExternal == o.MeshExternal && slices.Equal(s.ExportTo, o.ExportTo) &&
		slices.Equal(s.ServiceAccounts, o.ServiceAccounts) && othersEqual(s.Others, o.Others)
}

// Locality is where a workload runs.
type Locality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	Subzone string `json:"subzone,omitempty"`
}

// String is Istio's form, "region/zone/subzone".
func (l Locality) String() string {
	if l == (Locality{}) {
		return ""
	}
	return l.Region + "/" + l.Zone + "/" + l.Subzone
}

// ParseLocality reads "region/zone/subzone" or the label form
// "region.zone.subzone" (Kubernetes label values cannot hold "/"); missing
// parts stay empty. It follows Istio (SanitizeLocalityLabel, then
// SplitLocalityLabel) so that a label means the same locality in both: a
// value with a slash is split on slashes only, any other on dots, and parts
// past the third are ignored ("a/b/c/d" has subzone "c").
func ParseLocality(s string) Locality {
	sep := "/"
	if !strings.Contains(s, "/") {
		sep = "."
	}
	parts := strings.SplitN(s, sep, 4)
	var l Locality
	if len(parts) > 0 {
		l.Region = parts[0]
	}
	if len(parts) > 1 {
		l.Zone = parts[1]
	}
	if len(parts) > 2 {
		l.Subzone = parts[2]
	}
	return l
}

// Health is an endpoint's health as a client should treat it.
type Health int

const (
	// Healthy endpoints receive traffic.
	Healthy Health = iota
	// Draining endpoints are terminating but still serving: no new traffic.
	Draining
	// Unhealthy endpoints receive no traffic.
	Unhealthy
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "HEALTHY"
	case Draining:
		return "DRAINING"
	case Unhealthy:
		return "UNHEALTHY"
	}
	return "UNKNOWN"
}

// MarshalText lets Health appear by name in JSON.
func (h Health) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads the name MarshalText writes.
func (h *Health) UnmarshalText(b []byte) error {
	for _, v := range []Health{Healthy, Draining, Unhealthy} {
		if v.String() == string(b) {
			*h = v
			return nil
		}
	}
	return fmt.Errorf("unknown health %q", b)
}

// DefaultClusterID is the local cluster's ID when none is given, Istio's
// default (--cluster-id, CLUSTER_ID).
const DefaultClusterID = "Kubernetes"

// Endpoint is one address and port serving one port of a service.
type Endpoint struct {
	Address string `json:"address"`
	// Port is the workload port that serves ServicePort.
	Port uint32 `json:"port"`
	// ServicePortName names the service port this endpoint serves.
	ServicePortName string            `json:"servicePortName,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Locality        Locality          `json:"locality"`
	Health          Health            `json:"health"`
	Namespace       string            `json:"namespace,omitempty"`
	PodName         string            `json:"podName,omitempty"`
	NodeName        string            `json:"nodeName,omitempty"`
	ServiceAccount  string            `json:"serviceAccount,omitempty"`
	// Weight is the endpoint's share within its locality (a
	// WorkloadEntry's weight); 0 means 1.
	Weight uint32 `json:"weight,omitempty"`
	// Network is the network the endpoint is on (a WorkloadEntry's
	// network), kept for multi-network routing, which meshpilot does not
	// do yet.
	Network string `json:"network,omitempty"`
	// ClusterID is the cluster whose registry found the endpoint (a remote
	// cluster's ID); empty means the local cluster, whatever its ID
	// (--cluster-id). The local Kubernetes registry, files and
	// ServiceEntries leave it empty, so that the local ID can change
	// without rebuilding their endpoints.
	ClusterID string `json:"clusterID,omitempty"`
}

// Equal reports whether two endpoints carry the same content.
func (e *Endpoint) Equal(o *Endpoint) bool {
	if e == nil || o == nil {
		return e == o
	}
	return e.Address == o.Address && e.Port == o.Port && e.ServicePortName == o.ServicePortName &&
		maps.Equal(e.Labels, o.Labels) && e.Locality == o.Locality && e.Health == o.Health &&
		e.Namespace == o.Namespace && e.PodName == o.PodName && e.NodeName == o.NodeName &&
		e.ServiceAccount == o.ServiceAccount && e.Weight == o.Weight && e.Network == o.Network &&
		e.ClusterID == o.ClusterID
}

// Workload is what runs behind an IP address (a Kubernetes Pod).
type Workload struct {
	Name           string            `json:"name"`
	Namespace      string            `json:"namespace"`
	Addresses      []string          `json:"addresses"`
	Labels         map[string]string `json:"labels,omitempty"`
	Locality       Locality          `json:"locality"`
	NodeName       string            `json:"nodeName,omitempty"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
}

// Labels is a set of label requirements: every key must be present with
// the given value. An empty Labels matches everything.
type Labels map[string]string

// Matches reports whether the label set l selects an object carrying
// labels.
func (l Labels) Matches(labels map[string]string) bool {
	for k, v := range l {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
