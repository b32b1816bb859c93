package model

import (
	"cmp"
	"slices"
	"time"
)

// VirtualService is what a VirtualService (Istio's) says about the HTTP
// and gRPC traffic of the mesh to its hosts, in the terms the route
// generator uses: an ordered list of routes, the first that matches a
// request deciding where it goes. Only the mesh gateway's view is kept
// (routes of sidecars and proxyless clients), not ingress gateways'. A
// VirtualService is never changed once published.
type VirtualService struct {
	// Namespace and Name identify the object it came from.
	Namespace, Name string
	// Hosts are the FQDNs whose traffic it routes.
	Hosts []Hostname
	HTTP  []HTTPRoute
	// ExportTo lists the namespaces whose clients follow it, as Istio
	// writes them ("*", ".", "~", names); empty means every namespace.
	ExportTo []string
	// Created orders VirtualServices of equal standing for one host, as
	// Istio orders them (oldest first); zero when unknown (a file).
	Created time.Time
	// Gateway marks the routes of Gateway API HTTPRoutes and GRPCRoutes
	// attached to a Service (GAMMA), merged into one VirtualService per
	// namespace and host, which Istio reads with Gateway API semantics:
	// it applies only to clients of its own namespace unless Producer,
	// and wins over the other VirtualServices exported to all for the
	// clients of its namespace (Choose); a path prefix matches whole
	// path segments, and a backend that does not exist answers 500.
	Gateway bool
	// Producer: the routes are in the namespace of the Service they are
	// attached to (a producer route, for every client) rather than in a
	// client's (a consumer route, for its namespace's clients alone).
	Producer bool
}

// HTTPRoute is one http route: the requests it matches and what happens
// to them.
type HTTPRoute struct {
	Name string
	// Match: the route applies to a request any of these matches; none
	// matches every request.
	Match []HTTPMatch
	// Route are the weighted destinations; empty when the route answers
	// by itself (Redirect or DirectResponse, Envoy only).
	Route []RouteDestination
	// Timeout bounds a request; 0: none (Istio's default).
	Timeout time.Duration
	// Retries is the route's retry policy; nil: the mesh default, and
	// Attempts 0: no retries.
	Retries *HTTPRetry
	Fault   *HTTPFault
	// Redirect and DirectResponse answer the request without a
	// destination (grpc-go fails the RPCs such a route matches).
	Redirect       *HTTPRedirect
	DirectResponse *HTTPDirectResponse
	// Rewrite and Mirror change and copy the request (Envoy only:
	// grpc-go does neither).
	Rewrite *HTTPRewrite
	Mirror  []HTTPMirror
	// Headers changes the headers of requests and responses (Envoy
	// only: grpc-go ignores it).
	Headers *HTTPHeaders
}

// HTTPHeaders are changes to headers: Set replaces a header, Add appends
// to it, Remove drops it.
type HTTPHeaders struct {
	RequestSet, RequestAdd, ResponseSet, ResponseAdd map[string]string
	RequestRemove, ResponseRemove                    []string
}

// HTTPRewrite rewrites a request before it is forwarded (Envoy only).
type HTTPRewrite struct {
	// URI replaces the matched prefix; Authority the host.
	URI, Authority string
	// RegexMatch and RegexSubstitute, when set, rewrite the path by a
	// regular expression.
	RegexMatch, RegexSubstitute string
}

// HTTPMirror copies a share of requests to another destination,
// without waiting for its answers (Envoy only).
type HTTPMirror struct {
	Destination RouteDestination
	// Percent of requests mirrored (0 to 100).
	Percent float64
}

// HTTPMatch is one set of conditions, all of which a request meets.
type HTTPMatch struct {
	// URI matches the path (a gRPC method's is "/pkg.Service/Method");
	// nil matches every path.
	URI *StringMatch
	// IgnoreURICase matches the URI without regard to case.
	IgnoreURICase bool
	// Headers all match; Invert ones must not (withoutHeaders).
	Headers []HeaderMatch
	// QueryParams all match (grpc-go skips a route that has any).
	QueryParams []HeaderMatch
	// Port, when not 0, restricts the match to the route of that port.
	Port int32
	// SourceLabels and SourceNamespace, when set, restrict the match to
	// clients whose labels include them and of that namespace (Istio's
	// sourceMatchHTTP): the route generator leaves the match out for
	// other clients.
	SourceLabels    Labels
	SourceNamespace string
}

// AppliesTo reports whether the match applies to a client of namespace
// ns with labels.
func (m *HTTPMatch) AppliesTo(ns string, labels map[string]string) bool {
	return (m.SourceNamespace == "" || m.SourceNamespace == ns) && m.SourceLabels.Matches(labels)
}

// MatchKind says how a StringMatch compares.
type MatchKind uint8

const (
	MatchExact MatchKind = iota + 1
	MatchPrefix
	// MatchRegex: the whole value matches an RE2 expression.
	MatchRegex
	// MatchPresent: the header is there, with any value.
	MatchPresent
)

// StringMatch is a condition on a string.
type StringMatch struct {
	Kind  MatchKind
	Value string
}

// HeaderMatch is a condition on one header (or query parameter).
type HeaderMatch struct {
	Name string
	StringMatch
	// Invert: the request must not meet the condition.
	Invert bool
}

// RouteDestination is one destination of a route.
type RouteDestination struct {
	Host   Hostname
	Subset string
	// Port is the destination's port; 0: the only port of the host's
	// service, else the port of the route (Istio's choice).
	Port int32
	// Weight is the destination's share of requests relative to the
	// other destinations' of its route (Istio's: they need not add up to
	// 100); 0 gets none. One destination alone has 100.
	Weight int32
	// Headers changes the headers of the requests sent to this
	// destination and of their responses (Envoy only).
	Headers *HTTPHeaders
}

// HTTPFault injects delays and errors.
type HTTPFault struct {
	Delay *FaultDelay
	Abort *FaultAbort
}

// FaultDelay delays a share of requests by a fixed time.
type FaultDelay struct {
	Fixed time.Duration
	// Percent of requests delayed (0 to 100).
	Percent float64
}

// FaultAbort ends a share of requests with an error.
type FaultAbort struct {
	// GRPC: Code is a gRPC status code; otherwise an HTTP status.
	GRPC bool
	Code uint32
	// Percent of requests aborted (0 to 100).
	Percent float64
}

// HTTPRedirect answers with a redirect (Envoy only).
type HTTPRedirect struct {
	URI, Authority string
	// Code is the HTTP status; 0: 301.
	Code uint32
	// PrefixRewrite, when set, replaces the prefix the route matched
	// (URI is then unset).
	PrefixRewrite string
	// Scheme, when set, is the redirect's scheme.
	Scheme string
	// Port, when set, is the redirect's port. PortFromRequest keeps the
	// port the request was sent to: Envoy cannot read it from the
	// request, but a route serves one port, so it is that port.
	Port            uint32
	PortFromRequest bool
}

// HTTPDirectResponse answers with a fixed status and body (Envoy only).
type HTTPDirectResponse struct {
	Status uint32
	Body   string
}

// VisibleTo reports whether clients of namespace ns follow the
// VirtualService.
func (vs *VirtualService) VisibleTo(ns string) bool {
	return visibleTo(vs.ExportTo, vs.Namespace, ns)
}

// visibleTo applies an exportTo list as Istio reads it, for an object of
// namespace own and a client of namespace ns: "*" or an empty list every
// namespace, "." own, other entries namespace names. "~" (none) needs no
// case: no namespace is called "~".
func visibleTo(exportTo []string, own, ns string) bool {
	if len(exportTo) == 0 {
		return true
	}
	for _, e := range exportTo {
		switch e {
		case "*", ns:
			return true
		case ".":
			if ns == own {
				return true
			}
		}
	}
	return false
}

func (vs *VirtualService) public() bool { return exportedToAll(vs.ExportTo) }

// exportedToAll reports whether an exportTo list lets every namespace
// see its object, whatever its own namespace.
func exportedToAll(exportTo []string) bool {
	return len(exportTo) == 0 || slices.Contains(exportTo, "*")
}

// RouteIndex answers which VirtualService routes the traffic of a client
// to a host. It is safe for concurrent use; what it returns is immutable.
// A change to the VirtualServices of a host is reported as an event of
// kind ConfigChanged with VirtualServiceKey(host).
type RouteIndex interface {
	// VirtualServiceFor returns the VirtualService for traffic from a
	// client in clientNamespace to host, or nil. byClient reports whether
	// the answer depends on clientNamespace.
	VirtualServiceFor(host Hostname, clientNamespace string) (vs *VirtualService, byClient bool)
}

// VirtualServiceKey is the key of the VirtualServices that route a host:
// what reads them depends on it.
func VirtualServiceKey(h Hostname) ConfigKey {
	return ConfigKey{Kind: KindVirtualService, Name: string(h)}
}

// HostVirtualServices are the VirtualServices naming one host, at most
// one per namespace.
type HostVirtualServices []*VirtualService

// Choose picks the VirtualService a client follows as Istio does when
// several name one host (PushContext.VirtualServicesForGateway, then the
// first to claim the host wins): first one of the client's namespace
// exported only to chosen namespaces ("."), then one of another
// namespace exported to the client's by name, then the Gateway API
// routes of the client's namespace exported to all (the consumer's
// override), then one exported to all; within each group the oldest,
// then by name and namespace. Gateway API routes of a namespace that is
// neither the client's nor the Service's (another namespace's consumer
// routes) do not apply, as istiod skips them. byClient is false when
// every client gets the same answer: all are exported to all, and no
// Gateway API routes stand beside other VirtualServices or apply to
// their own namespace alone.
func (h HostVirtualServices) Choose(clientNS string) (vs *VirtualService, byClient bool) {
	best, bestRank := (*VirtualService)(nil), 4
	for _, v := range h {
		if !v.public() || v.Gateway && (!v.Producer || len(h) > 1) {
			byClient = true
		}
		if !v.VisibleTo(clientNS) || v.Gateway && !v.Producer && v.Namespace != clientNS {
			continue
		}
		rank := 3
		switch {
		case v.public() && v.Gateway && v.Namespace == clientNS:
			rank = 2
		case v.public():
		case v.Namespace == clientNS:
			rank = 0
		default:
			rank = 1
		}
		if best == nil || rank < bestRank || rank == bestRank && older(v, best) {
			best, bestRank = v, rank
		}
	}
	return best, byClient
}

func older(a, b *VirtualService) bool {
	return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace)) < 0
}

// Add records a VirtualService for its host unless its namespace already
// has an older one, and returns the one that lost (nil when none did):
// two VirtualServices of one namespace may not claim one host, and
// Istio keeps the oldest (by creation time, then by name: Created is
// whole seconds from the API server, so ties are common), whatever
// the order they arrive in. The Gateway API routes of a namespace (one
// VirtualService per host, merged) stand beside its VirtualService.
func (h *HostVirtualServices) Add(vs *VirtualService) (lost *VirtualService) {
	for i, cur := range *h {
		if cur.Namespace != vs.Namespace || cur.Gateway != vs.Gateway {
			continue
		}
		if older(vs, cur) {
			(*h)[i] = vs
			return cur
		}
		return vs
	}
	*h = append(*h, vs)
	return nil
}

// In returns the VirtualService (not Gateway API routes) of namespace
// ns, or nil.
func (h HostVirtualServices) In(ns string) *VirtualService {
	for _, vs := range h {
		if vs.Namespace == ns && !vs.Gateway {
			return vs
		}
	}
	return nil
}

// StaticRoutes is a RouteIndex over a fixed set of VirtualServices
// (tests; a source that rebuilds its index on each change).
type StaticRoutes struct {
	byHost map[Hostname]HostVirtualServices
}

// NewStaticRoutes indexes VirtualServices by host; of two of one
// namespace for one host, the older wins (HostVirtualServices.Add).
func NewStaticRoutes(vss []*VirtualService) *StaticRoutes {
	r := &StaticRoutes{byHost: map[Hostname]HostVirtualServices{}}
	for _, vs := range vss {
		for _, h := range vs.Hosts {
			hv := r.byHost[h]
			hv.Add(vs)
			r.byHost[h] = hv
		}
	}
	return r
}

// VirtualServiceFor implements RouteIndex.
func (r *StaticRoutes) VirtualServiceFor(host Hostname, clientNamespace string) (*VirtualService, bool) {
	return r.byHost[host].Choose(clientNamespace)
}
