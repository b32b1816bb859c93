package crd

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// GatewayConvertOptions shape ConvertHTTPRoute and ConvertGRPCRoute.
type GatewayConvertOptions struct {
	// DomainSuffix makes a Service's hostname; "cluster.local" when empty.
	DomainSuffix string
	// ServiceExists reports whether a Service exists; nil takes every
	// Service as existing.
	ServiceExists func(namespace, name string) bool
	// Grants are the ReferenceGrants in force: one of a Service's
	// namespace lets routes of another name its Services.
	Grants []*gatewayv1beta1.ReferenceGrant
}

// GatewayRoute is an HTTPRoute or a GRPCRoute as the mesh reads it: its
// rules for each Service it is attached to, what clients do not get of
// it (Status, for /debug/configz) and its Gateway API status
// (RouteStatus, for the status writer).
type GatewayRoute struct {
	Kind            string // gwstatus.KindHTTPRoute or gwstatus.KindGRPCRoute
	Namespace, Name string
	Created         time.Time
	// Parents are the Services the route is attached to and routes.
	Parents []GatewayParent
	// Services are every Service the route names, as parent or backend,
	// by hostname: the route is converted again when one of them comes
	// or goes (its status says whether it exists).
	Services    []model.Hostname
	Status      configstatus.Status
	RouteStatus gwstatus.RouteStatus
}

// GatewayParent is what a route does to the traffic to one Service.
type GatewayParent struct {
	Host model.Hostname
	// Producer: the route is of the Service's namespace.
	Producer bool
	// Rules have one match each (a rule of several matches is split, as
	// istiod splits it, so that each is ordered by its own precedence),
	// in the route's order, with parentRefs.port as a port match.
	Rules []model.HTTPRoute
}

// Why a Gateway API field is not applied, as reported.
const (
	whyGWNotMesh        = "a parent other than a Service (a Gateway, a ServiceEntry): meshpilot serves routes attached to Services (GAMMA) only"
	whyGWSectionName    = "sectionName on a Service parent is not supported: the route does not attach to it (use port)"
	whyGWSession        = "sessionPersistence is not implemented: the rule applies without it"
	whyGWGRPCRetryCodes = "grpc-go retries only on gRPC status names: the HTTP status codes apply to Envoy only; gRPC clients retry on unavailable and cancelled"
	whyGWGRPCMethod     = "grpc-go does not match the :method pseudo-header (as with istiod): this match never applies to gRPC clients, the others do"
	whyGWGRPCNoBackend  = "no backend can take requests: Envoy answers 500 as the Gateway API says, grpc-go fails the RPCs this rule matches with UNAVAILABLE"
	whyGWCORS           = "CORS is not implemented for Envoy yet, and does not concern gRPC clients"
)

// gatewayParentStatus gathers one Service parent's conditions while a
// route converts.
type gatewayParentStatus struct {
	ref                   gatewayv1.ParentReference
	accepted, acceptedWhy string // reason and message; "" accepted
	host                  model.Hostname
	port                  int32
	producer, attachable  bool
}

// gwConverter converts one route.
type gwConverter struct {
	opts     GatewayConvertOptions
	kind     string
	ns, name string
	status   configstatus.Status
	// refsWhy and refsReason are the first backend problem found,
	// reported in every parent's ResolvedRefs.
	refsReason, refsWhy string
	// acceptedReason and acceptedWhy are the first rule problem that
	// makes the route not Accepted as written.
	acceptedReason, acceptedWhy string
	services                    []model.Hostname
	// parentServices are the Services the route attaches to, as
	// "namespace/name".
	parentServices []string
}

func (c *gwConverter) suffix() string {
	if c.opts.DomainSuffix == "" {
		return model.DefaultDomainSuffix
	}
	return c.opts.DomainSuffix
}

func (c *gwConverter) serviceHost(ns, name string) model.Hostname {
	h := model.ServiceHostname(name, ns, c.suffix())
	if !slices.Contains(c.services, h) {
		c.services = append(c.services, h)
	}
	return h
}

func (c *gwConverter) serviceExists(ns, name string) bool {
	return c.opts.ServiceExists == nil || c.opts.ServiceExists(ns, name)
}

func (c *gwConverter) ignoreBoth(path, why string) {
	c.status.IgnoreGRPC(path, why)
	c.status.IgnoreEnvoy(path, why)
}

// notAccepted records the first problem that keeps the route from being
// served as written.
func (c *gwConverter) notAccepted(reason gatewayv1.RouteConditionReason, why string) {
	if c.acceptedReason == "" {
		c.acceptedReason, c.acceptedWhy = string(reason), why
	}
}

// refProblem records the first backend that cannot be resolved.
func (c *gwConverter) refProblem(reason gatewayv1.RouteConditionReason, why string) {
	if c.refsReason == "" {
		c.refsReason, c.refsWhy = string(reason), why
	}
}

// parents reads the parentRefs: the Services of the mesh, each with its
// status; other parents are another controller's and are only reported.
func (c *gwConverter) parents(refs []gatewayv1.ParentReference) []*gatewayParentStatus {
	var out []*gatewayParentStatus
	for i, ref := range refs {
		path := fmt.Sprintf("spec.parentRefs[%d]", i)
		group, kind := "", "Gateway"
		if ref.Group != nil {
			group = string(*ref.Group)
		} else {
			group = gatewayv1.GroupName
		}
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		if !(group == "" || group == "core") || kind != "Service" {
			c.ignoreBoth(path, whyGWNotMesh)
			continue
		}
		ns := c.ns
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = string(*ref.Namespace)
		}
		p := &gatewayParentStatus{ref: ref, host: c.serviceHost(ns, string(ref.Name)), producer: ns == c.ns, attachable: true}
		c.parentServices = append(c.parentServices, ns+"/"+string(ref.Name))
		if ref.Port != nil {
			p.port = *ref.Port
		}
		switch {
		case ref.SectionName != nil && *ref.SectionName != "":
			c.ignoreBoth(path+".sectionName", whyGWSectionName)
			p.accepted, p.acceptedWhy, p.attachable = string(gatewayv1.RouteReasonUnsupportedValue), whyGWSectionName, false
		case !c.serviceExists(ns, string(ref.Name)):
			p.accepted, p.acceptedWhy = string(gatewayv1.RouteReasonNoMatchingParent), fmt.Sprintf("Service %s/%s does not exist", ns, ref.Name)
			p.attachable = false
		}
		out = append(out, p)
	}
	return out
}

// finish builds the route's parents and status from its rules (each of
// one match, without a port) and its parents.
func (c *gwConverter) finish(obj metav1.Object, parents []*gatewayParentStatus, rules []model.HTTPRoute) *GatewayRoute {
	out := &GatewayRoute{Kind: c.kind, Namespace: c.ns, Name: c.name, Created: obj.GetCreationTimestamp().Time}
	out.RouteStatus = gwstatus.RouteStatus{Kind: c.kind, Namespace: c.ns, Name: c.name, Generation: obj.GetGeneration()}
	for _, p := range parents {
		accepted := metav1.Condition{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonAccepted), Message: "attached to the Service's traffic in the mesh"}
		switch {
		case p.accepted != "":
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, p.accepted, p.acceptedWhy
		case c.acceptedReason != "":
			accepted.Status, accepted.Reason, accepted.Message = metav1.ConditionFalse, c.acceptedReason, c.acceptedWhy
		}
		resolved := metav1.Condition{Type: string(gatewayv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue,
			Reason: string(gatewayv1.RouteReasonResolvedRefs), Message: "every backend resolved"}
		if c.refsReason != "" {
			resolved.Status, resolved.Reason, resolved.Message = metav1.ConditionFalse, c.refsReason, c.refsWhy
		}
		out.RouteStatus.Parents = append(out.RouteStatus.Parents, gwstatus.ParentStatus{ParentRef: p.ref, Conditions: []metav1.Condition{accepted, resolved}})
		if !p.attachable || len(rules) == 0 {
			continue
		}
		gp := GatewayParent{Host: p.host, Producer: p.producer, Rules: withPort(rules, p.port)}
		if i := slices.IndexFunc(out.Parents, func(o GatewayParent) bool { return o.Host == gp.Host }); i >= 0 {
			// Two refs of one Service (two ports): one parent with
			// the rules of both.
			out.Parents[i].Rules = append(out.Parents[i].Rules, gp.Rules...)
			continue
		}
		out.Parents = append(out.Parents, gp)
	}
	slices.Sort(c.services)
	out.Services = c.services
	out.Status = c.status
	return out
}

// withPort copies rules with a port match, as istiod's augmentPortMatch:
// a rule without a match gets one of the port alone.
func withPort(rules []model.HTTPRoute, port int32) []model.HTTPRoute {
	out := make([]model.HTTPRoute, len(rules))
	for i, r := range rules {
		r.Match = slices.Clone(r.Match)
		if port != 0 {
			if len(r.Match) == 0 {
				r.Match = []model.HTTPMatch{{}}
			}
			for j := range r.Match {
				r.Match[j].Port = port
			}
		}
		out[i] = r
	}
	return out
}

// ruleName names a rule as istiod does: its name, else
// "<namespace>.<name>.<index>".
func (c *gwConverter) ruleName(name *gatewayv1.SectionName, i int) string {
	if name != nil && *name != "" {
		return string(*name)
	}
	return fmt.Sprintf("%s.%s.%d", c.ns, c.name, i)
}

// headerMatch converts a header (or query parameter) match: exact, or
// an RE2 regular expression.
func (c *gwConverter) headerMatch(path, name, value string, regex bool) (model.HeaderMatch, bool) {
	out := model.HeaderMatch{Name: strings.ToLower(name), StringMatch: model.StringMatch{Kind: model.MatchExact, Value: value}}
	if regex {
		if _, err := regexp.Compile(value); err != nil {
			c.status.RefuseAt(path+".value", "not an RE2 regular expression: "+err.Error())
			return out, false
		}
		out.Kind = model.MatchRegex
	}
	return out, true
}

// headerOps converts a header modifier; names are lowercased, as HTTP/2
// writes them.
func headerOps(f *gatewayv1.HTTPHeaderFilter, request bool, into **model.HTTPHeaders) {
	if f == nil {
		return
	}
	if *into == nil {
		*into = &model.HTTPHeaders{}
	}
	set, add := map[string]string{}, map[string]string{}
	for _, h := range f.Set {
		set[strings.ToLower(string(h.Name))] = h.Value
	}
	for _, h := range f.Add {
		add[strings.ToLower(string(h.Name))] = h.Value
	}
	var remove []string
	for _, r := range f.Remove {
		remove = append(remove, strings.ToLower(r))
	}
	h := *into
	if request {
		h.RequestSet, h.RequestAdd, h.RequestRemove = nonEmpty(set), nonEmpty(add), remove
	} else {
		h.ResponseSet, h.ResponseAdd, h.ResponseRemove = nonEmpty(set), nonEmpty(add), remove
	}
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// duration reads a Gateway API duration ("1h", "500ms", "0s").
func (c *gwConverter) duration(path string, d *gatewayv1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil || v < 0 {
		c.status.RefuseAt(path, fmt.Sprintf("%q is not a duration", *d))
		return 0
	}
	return v
}
