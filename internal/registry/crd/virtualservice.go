package crd

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
)

// ConvertOptions shape ConvertVirtualService.
type ConvertOptions struct {
	// DomainSuffix resolves short hosts; "cluster.local" when empty.
	DomainSuffix string
	// SubsetDefined reports whether a DestinationRule defines a subset
	// of a host; nil takes every subset as defined.
	SubsetDefined func(host model.Hostname, subset string) bool
}

// meshGateway is the gateway name of sidecars and proxyless clients.
const meshGateway = "mesh"

// Why a field is not applied, as reported.
const (
	whyGatewayOnly = "meshpilot serves the mesh gateway (sidecars and proxyless clients) only"
	// What grpc-go does with the routes istiod sends it, which meshpilot
	// sends alike (the rest of the VirtualService applies).
	whyGRPCNoRedirect = "grpc-go cannot redirect: it fails the RPCs this route matches with UNAVAILABLE (as with istiod); the other routes apply"
	whyGRPCNoDirect   = "grpc-go cannot answer by itself: it fails the RPCs this route matches with UNAVAILABLE (as with istiod); the other routes apply"
	whyGRPCNoRewrite  = "grpc-go does not rewrite requests: not sent, the route applies without it"
	whyGRPCNoMirror   = "grpc-go does not mirror requests: not sent, the route applies without it"
	whyGRPCNoCORS     = "CORS does not concern gRPC clients: not sent (istiod sends a CORS filter config, which grpc-go NACKs with the whole route configuration)"
	whyGRPCNoQuery    = "grpc-go skips a route that matches query parameters (as with istiod): this match never applies to gRPC clients, the others do"
	whyGRPCNoPseudo   = "grpc-go does not match pseudo-headers (as with istiod): this match never applies to gRPC clients, the others do"
	whyGRPCWithout    = "grpc-go does not match a request that lacks the header (as with istiod): for gRPC clients the match needs the header present with another value"
	whyNotEnvoy       = "not implemented for Envoy yet"
	whyNoHeaderOps    = "grpc-go does not change request or response headers"
	whyNoPerTry       = "grpc-go has no per-attempt timeout"
)

// grpcCodes are the gRPC status names an abort may give, as Istio
// accepts them (SupportedGRPCStatus), with their codes.
var grpcCodes = map[string]uint32{
	"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
	"NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
	"FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
	"INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

// grpcRetryOn are the retryOn conditions grpc-go honours (gRFC A44).
var grpcRetryOn = []string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// nonGRPCRetryOn lists the conditions of a retryOn list that grpc-go
// ignores.
func nonGRPCRetryOn(retryOn string) []string {
	var out []string
	for part := range strings.SplitSeq(retryOn, ",") {
		if part = strings.TrimSpace(part); part != "" && !slices.Contains(grpcRetryOn, part) {
			out = append(out, part)
		}
	}
	return out
}

// ConvertVirtualService turns a VirtualService into the model's view of
// its mesh routes and says what became of it. It returns nil when the
// object is refused (Status.Refused: the first problem found) or routes
// nothing for the mesh (other gateways only, wildcard hosts only).
//
// Refused: several destinations of a route whose weights are all 0, a
// destination naming a subset no DestinationRule defines, a regular expression that
// is not RE2, an unknown gRPC status, a route with nowhere to go.
// gRPC clients get the VirtualService as istiod serves it to them, and
// each field grpc-go does not honour is reported with what it does
// instead: a route grpc-go cannot take (redirect, directResponse) fails
// the RPCs it matches, a match it cannot evaluate (query, method,
// authority, scheme) never applies, withoutHeaders needs the header
// present; rewrite, mirror, CORS and header changes are not sent (it
// would ignore them, or NACK CORS), perTryTimeout is sent and ignored.
// Envoy gets what is implemented (matches, redirect, directResponse,
// rewrite, mirror, header changes, as istiod writes them); the rest
// (CORS) is reported.
func ConvertVirtualService(vs *networkingv1.VirtualService, o ConvertOptions) (*model.VirtualService, configstatus.Status) {
	c := &vsConverter{opts: o, ns: vs.Namespace}
	out := c.convert(vs)
	if c.status.Refused != nil {
		return nil, c.status
	}
	return out, c.status
}

type vsConverter struct {
	opts   ConvertOptions
	ns     string
	status configstatus.Status
}

func (c *vsConverter) ignoreBoth(path, why string) {
	c.status.IgnoreGRPC(path, why)
	c.status.IgnoreEnvoy(path, why)
}

func (c *vsConverter) convert(vs *networkingv1.VirtualService) *model.VirtualService {
	spec := &vs.Spec
	if gws := spec.GetGateways(); len(gws) > 0 {
		mesh := false
		for i, gw := range gws {
			if gw == meshGateway {
				mesh = true
				continue
			}
			c.ignoreBoth(fmt.Sprintf("spec.gateways[%d]", i), whyGatewayOnly)
		}
		if !mesh {
			return nil
		}
	}
	out := &model.VirtualService{
		Namespace: vs.Namespace,
		Name:      vs.Name,
		ExportTo:  spec.GetExportTo(),
		Created:   vs.CreationTimestamp.Time,
	}
	for i, h := range spec.GetHosts() {
		host, ok := ruleHost(h, vs.Namespace, c.opts.DomainSuffix)
		if !ok {
			c.ignoreBoth(fmt.Sprintf("spec.hosts[%d]", i), "wildcard hosts are not served yet")
			continue
		}
		if !slices.Contains(out.Hosts, host) {
			out.Hosts = append(out.Hosts, host)
		}
	}
	if len(spec.GetTls()) > 0 {
		c.ignoreBoth("spec.tls", "meshpilot routes HTTP and gRPC only")
	}
	if len(spec.GetTcp()) > 0 {
		c.ignoreBoth("spec.tcp", "meshpilot routes HTTP and gRPC only")
	}
	for i, r := range spec.GetHttp() {
		if route, ok := c.route(fmt.Sprintf("spec.http[%d]", i), r); ok {
			out.HTTP = append(out.HTTP, route)
		}
	}
	if len(out.Hosts) == 0 {
		return nil
	}
	return out
}

// route converts one http route; false when it does not apply to the
// mesh (every match is for other gateways) or is a delegate.
func (c *vsConverter) route(path string, r *apinetworking.HTTPRoute) (model.HTTPRoute, bool) {
	out := model.HTTPRoute{Name: r.GetName()}
	if r.GetDelegate() != nil {
		c.ignoreBoth(path+".delegate", "delegation is not supported: the route is left out")
		return out, false
	}
	matches := r.GetMatch()
	for j, m := range matches {
		if mm, ok := c.match(fmt.Sprintf("%s.match[%d]", path, j), m); ok {
			out.Match = append(out.Match, mm)
		}
	}
	if len(matches) > 0 && len(out.Match) == 0 {
		return out, false
	}
	c.destinations(path, r, &out)
	if d := r.GetTimeout(); d != nil {
		out.Timeout = d.AsDuration()
		if out.Timeout < 0 {
			c.status.RefuseAt(path+".timeout", "a timeout is not negative")
		}
	}
	if p := r.GetRetries(); p != nil {
		retry, err := meshconfig.ConvertHTTPRetry(p)
		if err != nil {
			field, _, _ := strings.Cut(err.Error(), ":")
			c.status.RefuseAt(path+".retries."+field, err.Error())
			retry = &model.HTTPRetry{}
		}
		out.Retries = retry
		if others := nonGRPCRetryOn(p.GetRetryOn()); len(others) > 0 && retry.Attempts > 0 {
			c.status.IgnoreGRPC(path+".retries.retryOn", fmt.Sprintf(
				"grpc-go retries only on gRPC status names (%s); for Envoy only: %s", strings.Join(grpcRetryOn, ", "), strings.Join(others, ", ")))
		}
		if p.GetPerTryTimeout() != nil && retry.Attempts > 0 {
			c.status.IgnoreGRPC(path+".retries.perTryTimeout", whyNoPerTry)
		}
		if p.GetRetryRemoteLocalities() != nil {
			c.ignoreBoth(path+".retries.retryRemoteLocalities", "not implemented")
		}
	}
	out.Fault = c.fault(path+".fault", r.GetFault())
	c.answers(path, r, &out)
	if h := r.GetHeaders(); h != nil {
		c.status.IgnoreGRPC(path+".headers", whyNoHeaderOps)
		out.Headers = convertHeaders(h)
	}
	if r.GetCorsPolicy() != nil {
		c.status.IgnoreGRPC(path+".corsPolicy", whyGRPCNoCORS)
		c.status.IgnoreEnvoy(path+".corsPolicy", whyNotEnvoy)
	}
	c.mirrors(path, r, &out)
	return out, true
}

// answers converts what answers a request without a destination, and a
// rewrite: all for Envoy only.
func (c *vsConverter) answers(path string, r *apinetworking.HTTPRoute, out *model.HTTPRoute) {
	if rd := r.GetRedirect(); rd != nil {
		c.status.IgnoreGRPC(path+".redirect", whyGRPCNoRedirect)
		// As istiod's route translation: a port, or the port the request
		// came to (the route's, since a route serves one port), or
		// without either the scheme's default, which is Envoy's own.
		out.Redirect = &model.HTTPRedirect{URI: rd.GetUri(), Authority: rd.GetAuthority(), Code: rd.GetRedirectCode(),
			Scheme: rd.GetScheme(), PrefixRewrite: rd.GetPrefixRewrite(), Port: rd.GetPort(),
			PortFromRequest: rd.GetDerivePort() == apinetworking.HTTPRedirect_FROM_REQUEST_PORT && rd.GetPort() == 0}
	}
	if dr := r.GetDirectResponse(); dr != nil {
		c.status.IgnoreGRPC(path+".directResponse", whyGRPCNoDirect)
		out.DirectResponse = &model.HTTPDirectResponse{Status: dr.GetStatus(), Body: dr.GetBody().GetString_()}
		if len(dr.GetBody().GetBytes()) > 0 {
			out.DirectResponse.Body = string(dr.GetBody().GetBytes())
		}
	}
	if rw := r.GetRewrite(); rw != nil {
		c.status.IgnoreGRPC(path+".rewrite", whyGRPCNoRewrite)
		out.Rewrite = &model.HTTPRewrite{URI: rw.GetUri(), Authority: rw.GetAuthority(),
			RegexMatch: rw.GetUriRegexRewrite().GetMatch(), RegexSubstitute: rw.GetUriRegexRewrite().GetRewrite()}
		if out.Rewrite.RegexMatch != "" {
			if _, err := regexp.Compile(out.Rewrite.RegexMatch); err != nil {
				c.status.RefuseAt(path+".rewrite.uriRegexRewrite.match", "not an RE2 regular expression: "+err.Error())
			}
		}
	}
	if len(out.Route) == 0 && out.Redirect == nil && out.DirectResponse == nil {
		c.status.RefuseAt(path+".route", "a route needs a destination, a redirect or a direct response")
	}
}

// convertHeaders converts header changes.
func convertHeaders(h *apinetworking.Headers) *model.HTTPHeaders {
	return &model.HTTPHeaders{
		RequestSet: h.GetRequest().GetSet(), RequestAdd: h.GetRequest().GetAdd(), RequestRemove: h.GetRequest().GetRemove(),
		ResponseSet: h.GetResponse().GetSet(), ResponseAdd: h.GetResponse().GetAdd(), ResponseRemove: h.GetResponse().GetRemove(),
	}
}

// mirrors converts mirror (with mirrorPercentage or the deprecated
// mirrorPercent) and mirrors as istiod does: no percentage is all
// requests, 0 is none.
func (c *vsConverter) mirrors(path string, r *apinetworking.HTTPRoute, out *model.HTTPRoute) {
	add := func(field string, d *apinetworking.Destination, p *apinetworking.Percent, deprecated *uint32) {
		c.status.IgnoreGRPC(field, whyGRPCNoMirror)
		host, ok := ruleHost(d.GetHost(), c.ns, c.opts.DomainSuffix)
		if !ok {
			c.status.RefuseAt(field+".host", fmt.Sprintf("%q is not a service host", d.GetHost()))
			return
		}
		c.destination(field, d)
		pct := 100.0
		switch {
		case p != nil:
			pct = p.GetValue()
		case deprecated != nil:
			pct = float64(*deprecated)
		}
		if pct <= 0 {
			return
		}
		out.Mirror = append(out.Mirror, model.HTTPMirror{Percent: pct,
			Destination: model.RouteDestination{Host: host, Subset: d.GetSubset(), Port: int32(d.GetPort().GetNumber())}})
	}
	if m := r.GetMirror(); m != nil {
		var deprecated *uint32
		if mp := r.GetMirrorPercent(); mp != nil {
			v := mp.GetValue()
			deprecated = &v
		}
		add(path+".mirror", m, r.GetMirrorPercentage(), deprecated)
	}
	for i, m := range r.GetMirrors() {
		add(fmt.Sprintf("%s.mirrors[%d].destination", path, i), m.GetDestination(), m.GetPercentage(), nil)
	}
}

// destination refuses what would name a cluster no client can get, as
// Istio's validation (validateDestination) does: a port number beyond
// 65535 (0 is none: the host's only port), a subset name that is no DNS
// label.
func (c *vsConverter) destination(path string, d *apinetworking.Destination) {
	if n := d.GetPort().GetNumber(); n > 65535 {
		c.status.RefuseAt(path+".port.number", fmt.Sprintf("port %d is not between 1 and 65535", n))
	}
	if s := d.GetSubset(); s != "" {
		if why := badSubsetName(s); why != "" {
			c.status.RefuseAt(path+".subset", why)
		}
	}
}

// destinations converts a route's destinations and checks their weights
// and subsets.
func (c *vsConverter) destinations(path string, r *apinetworking.HTTPRoute, out *model.HTTPRoute) {
	dests := r.GetRoute()
	total := int64(0) // weights are int32: three can wrap around to 100
	for k, d := range dests {
		dp := fmt.Sprintf("%s.route[%d]", path, k)
		host, ok := ruleHost(d.GetDestination().GetHost(), c.ns, c.opts.DomainSuffix)
		if !ok {
			c.status.RefuseAt(dp+".destination.host", fmt.Sprintf("%q is not a service host", d.GetDestination().GetHost()))
			continue
		}
		dst := model.RouteDestination{
			Host:   host,
			Subset: d.GetDestination().GetSubset(),
			Port:   int32(d.GetDestination().GetPort().GetNumber()),
			Weight: d.GetWeight(),
		}
		if dst.Weight < 0 {
			c.status.RefuseAt(dp+".weight", "a weight is not negative")
		}
		c.destination(dp+".destination", d.GetDestination())
		if dst.Subset != "" && c.opts.SubsetDefined != nil && !c.opts.SubsetDefined(host, dst.Subset) {
			c.status.RefuseAt(dp+".destination.subset", fmt.Sprintf("no DestinationRule for %s defines subset %q", host, dst.Subset))
		}
		if h := d.GetHeaders(); h != nil {
			c.status.IgnoreGRPC(dp+".headers", whyNoHeaderOps)
			dst.Headers = convertHeaders(h)
		}
		total += int64(dst.Weight)
		out.Route = append(out.Route, dst)
	}
	// Weights are relative, as Istio reads them: a lone destination gets
	// every request whatever its weight, and among several a weight of 0
	// gets none (the route leaves it out). Istio's validation refuses
	// only several destinations whose weights are all 0, where nothing
	// is left; a total beyond 2^32-1 is refused too, because grpc-go
	// NACKs it and Envoy rejects it.
	switch {
	case len(out.Route) == 1:
		out.Route[0].Weight = 100
	case len(out.Route) > 1 && total == 0:
		c.status.RefuseAt(path+".route", "the weights add up to 0: no destination would get a request")
	case total > math.MaxUint32:
		c.status.RefuseAt(path+".route", fmt.Sprintf("the weights add up to %d, beyond %d", total, uint32(math.MaxUint32)))
	}
}

// match converts one match; false when it is for other gateways than the
// mesh, or (Envoy) never matches.
func (c *vsConverter) match(path string, m *apinetworking.HTTPMatchRequest) (model.HTTPMatch, bool) {
	out := model.HTTPMatch{IgnoreURICase: m.GetIgnoreUriCase(), Port: int32(m.GetPort())}
	if gws := m.GetGateways(); len(gws) > 0 && !slices.Contains(gws, meshGateway) {
		c.ignoreBoth(path+".gateways", whyGatewayOnly+": the match is left out")
		return out, false
	}
	if u := m.GetUri(); u != nil {
		sm, ok := c.stringMatch(path+".uri", u)
		if ok && sm.Kind != model.MatchPresent {
			out.URI = &sm
		}
	}
	out.Headers = c.headers(path+".headers", m.GetHeaders(), false)
	if wh := m.GetWithoutHeaders(); len(wh) > 0 {
		c.status.IgnoreGRPC(path+".withoutHeaders", whyGRPCWithout)
		out.Headers = append(out.Headers, c.headers(path+".withoutHeaders", wh, true)...)
	}
	for _, pseudo := range []struct {
		field, header string
		m             *apinetworking.StringMatch
	}{
		{"method", ":method", m.GetMethod()},
		{"authority", ":authority", m.GetAuthority()},
		{"scheme", ":scheme", m.GetScheme()},
	} {
		if pseudo.m == nil {
			continue
		}
		c.status.IgnoreGRPC(path+"."+pseudo.field, whyGRPCNoPseudo)
		if sm, ok := c.stringMatch(path+"."+pseudo.field, pseudo.m); ok {
			out.Headers = append(out.Headers, model.HeaderMatch{Name: pseudo.header, StringMatch: sm})
		}
	}
	if q := m.GetQueryParams(); len(q) > 0 {
		c.status.IgnoreGRPC(path+".queryParams", whyGRPCNoQuery)
		out.QueryParams = c.headers(path+".queryParams", q, false)
	}
	if len(m.GetSourceLabels()) > 0 || m.GetSourceNamespace() != "" {
		if len(m.GetGateways()) > 0 {
			// istiod's sourceMatchHTTP checks a match's gateways
			// instead of the client's labels and namespace.
			c.ignoreBoth(path+".sourceLabels", "a match that names gateways applies to every client of them, as in istiod: sourceLabels and sourceNamespace are not checked")
		} else {
			out.SourceLabels = model.Labels(m.GetSourceLabels())
			out.SourceNamespace = m.GetSourceNamespace()
		}
	}
	return out, true
}

// headers converts a map of header (or query) matches, ordered by name.
func (c *vsConverter) headers(path string, in map[string]*apinetworking.StringMatch, invert bool) []model.HeaderMatch {
	var out []model.HeaderMatch
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range in {
			if !yield(k) {
				return
			}
		}
	}) {
		sm, ok := c.stringMatch(path+"."+name, in[name])
		if !ok {
			continue
		}
		out = append(out, model.HeaderMatch{Name: strings.ToLower(name), StringMatch: sm, Invert: invert})
	}
	return out
}

// stringMatch converts a StringMatch; an empty one (or the regex "*", as
// Istio reads it) means present.
func (c *vsConverter) stringMatch(path string, m *apinetworking.StringMatch) (model.StringMatch, bool) {
	switch t := m.GetMatchType().(type) {
	case *apinetworking.StringMatch_Exact:
		return model.StringMatch{Kind: model.MatchExact, Value: t.Exact}, true
	case *apinetworking.StringMatch_Prefix:
		return model.StringMatch{Kind: model.MatchPrefix, Value: t.Prefix}, true
	case *apinetworking.StringMatch_Regex:
		if t.Regex == "*" {
			return model.StringMatch{Kind: model.MatchPresent}, true
		}
		// Envoy and grpc-go both use RE2, whose syntax Go's regexp is.
		if _, err := regexp.Compile(t.Regex); err != nil {
			c.status.RefuseAt(path+".regex", "not an RE2 regular expression: "+err.Error())
			return model.StringMatch{}, false
		}
		return model.StringMatch{Kind: model.MatchRegex, Value: t.Regex}, true
	}
	return model.StringMatch{Kind: model.MatchPresent}, true
}

// fault converts fault injection as istiod does: a percentage left out
// is none (Istio's documented default), exponential delays and HTTP/2
// errors are not supported (istiod drops them too).
func (c *vsConverter) fault(path string, f *apinetworking.HTTPFaultInjection) *model.HTTPFault {
	if f == nil {
		return nil
	}
	out := &model.HTTPFault{}
	if d := f.GetDelay(); d != nil {
		if fd := d.GetFixedDelay(); fd != nil {
			out.Delay = &model.FaultDelay{Fixed: fd.AsDuration(), Percent: percent(d.GetPercentage(), d.GetPercent())}
		} else {
			c.ignoreBoth(path+".delay", "only fixedDelay is supported (as in istiod)")
		}
	}
	if a := f.GetAbort(); a != nil {
		switch t := a.GetErrorType().(type) {
		case *apinetworking.HTTPFaultInjection_Abort_HttpStatus:
			out.Abort = &model.FaultAbort{Code: uint32(t.HttpStatus), Percent: percent(a.GetPercentage(), 0)}
			if t.HttpStatus < 200 || t.HttpStatus > 599 {
				c.status.RefuseAt(path+".abort.httpStatus", "an HTTP status is between 200 and 599")
			}
		case *apinetworking.HTTPFaultInjection_Abort_GrpcStatus:
			code, ok := grpcCodes[t.GrpcStatus]
			if !ok {
				c.status.RefuseAt(path+".abort.grpcStatus", fmt.Sprintf("%q is not a gRPC status name", t.GrpcStatus))
			}
			out.Abort = &model.FaultAbort{GRPC: true, Code: code, Percent: percent(a.GetPercentage(), 0)}
		default:
			c.ignoreBoth(path+".abort", "only httpStatus and grpcStatus are supported (as in istiod)")
		}
	}
	if out.Delay == nil && out.Abort == nil {
		return nil
	}
	return out
}

// percent reads a fault's share: percentage, else the deprecated integer
// percent.
func percent(p *apinetworking.Percent, deprecated int32) float64 {
	if p != nil {
		return p.GetValue()
	}
	return float64(deprecated)
}
