package crd

import (
	"fmt"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// gwBackend is a backendRef of either route kind with its header
// changes.
type gwBackend struct {
	ref     gatewayv1.BackendRef
	headers *model.HTTPHeaders
}

// backend resolves a backend reference to a Service's destination, as
// istiod's buildDestination does; false when it is left out: a kind other
// than Service (InvalidKind), a Service of another namespace that no
// ReferenceGrant of that namespace lets the route name (RefNotPermitted),
// no port. A Service that does not exist is kept (BackendNotFound): its
// requests fail, with 500 from Envoy as the Gateway API says.
//
// The Service a route attaches to needs no grant as its backend: a
// consumer route sending its namespace's requests on to the Service they
// were for reaches nothing its clients could not reach already (GEP-1294
// lets mesh routes name backends of any namespace for that reason, and
// the mesh conformance scenario MeshConsumerRoute relies on it).
func (c *gwConverter) backend(path string, ref gatewayv1.BackendObjectReference) (model.RouteDestination, bool) {
	group, kind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if !(group == "" || group == "core") || kind != "Service" {
		why := fmt.Sprintf("%s: a backend of group %q and kind %q: meshpilot routes to Services only; left out", path, group, kind)
		c.refProblem(gatewayv1.RouteReasonInvalidKind, why)
		c.ignoreBoth(path, "a backend other than a Service: left out")
		return model.RouteDestination{}, false
	}
	ns := c.ns
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	name := string(ref.Name)
	if ns != c.ns && !slices.Contains(c.parentServices, ns+"/"+name) && !c.granted(ns, name) {
		c.refProblem(gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf(
			"%s: Service %s/%s is of another namespace and no ReferenceGrant of %s lets a %s of %s name it; left out", path, ns, name, ns, c.kind, c.ns))
		c.ignoreBoth(path, fmt.Sprintf("no ReferenceGrant of namespace %s allows it: left out", ns))
		return model.RouteDestination{}, false
	}
	if ref.Port == nil || strings.Contains(name, ".") {
		c.refProblem(gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: a Service backend needs a port and a Service's name (not a hostname); left out", path))
		c.ignoreBoth(path, "a Service backend needs a port and the Service's name: left out")
		return model.RouteDestination{}, false
	}
	host := c.serviceHost(ns, name)
	if !c.serviceExists(ns, name) {
		c.refProblem(gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("%s: Service %s/%s does not exist: its share of requests fails", path, ns, name))
	}
	return model.RouteDestination{Host: host, Port: *ref.Port}, true
}

// granted reports whether a ReferenceGrant of namespace ns lets the
// route's kind in the route's namespace name Service name.
func (c *gwConverter) granted(ns, name string) bool {
	for _, g := range c.opts.Grants {
		if g.Namespace != ns {
			continue
		}
		from := false
		for _, f := range g.Spec.From {
			if string(f.Group) == gatewayv1.GroupName && string(f.Kind) == c.kind && string(f.Namespace) == c.ns {
				from = true
				break
			}
		}
		if !from {
			continue
		}
		for _, t := range g.Spec.To {
			if (t.Group == "" || t.Group == "core") && t.Kind == "Service" && (t.Name == nil || *t.Name == "" || string(*t.Name) == name) {
				return true
			}
		}
	}
	return false
}

// destinations converts a rule's backends as istiod does: weights
// relative (1 when unset), a backend of weight 0 left out, one left
// alone taking every request. ok is false when no backend is left to
// take requests (none, every weight 0, every backend left out): the
// rule then answers 500, as the Gateway API says.
func (c *gwConverter) destinations(path string, backends []gwBackend) (out []model.RouteDestination, ok bool) {
	for i, b := range backends {
		w := int32(1)
		if b.ref.Weight != nil {
			w = *b.ref.Weight
		}
		if w == 0 {
			continue
		}
		d, ok := c.backend(fmt.Sprintf("%s.backendRefs[%d]", path, i), b.ref.BackendObjectReference)
		if !ok {
			continue
		}
		d.Weight, d.Headers = w, b.headers
		if b.headers != nil {
			c.status.IgnoreGRPC(fmt.Sprintf("%s.backendRefs[%d].filters", path, i), whyNoHeaderOps)
		}
		out = append(out, d)
	}
	if len(out) == 1 {
		out[0].Weight = 100
	}
	return out, len(out) > 0
}

// mirror converts a RequestMirror filter (Envoy only): percent or
// fraction, all requests when neither is given.
func (c *gwConverter) mirror(path string, f *gatewayv1.HTTPRequestMirrorFilter) (model.HTTPMirror, bool) {
	c.status.IgnoreGRPC(path, whyGRPCNoMirror)
	d, ok := c.backend(path+".backendRef", f.BackendRef)
	if !ok {
		return model.HTTPMirror{}, false
	}
	pct := 100.0
	switch {
	case f.Fraction != nil:
		den := int32(100)
		if f.Fraction.Denominator != nil {
			den = *f.Fraction.Denominator
		}
		if den <= 0 {
			c.status.RefuseAt(path+".fraction.denominator", "a denominator is above 0")
			return model.HTTPMirror{}, false
		}
		pct = 100 * float64(f.Fraction.Numerator) / float64(den)
	case f.Percent != nil:
		pct = float64(*f.Percent)
	}
	return model.HTTPMirror{Destination: d, Percent: pct}, pct > 0
}
