package file

import (
	"fmt"
	"regexp"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	kjson "sigs.k8s.io/json"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// The Gateway API kinds the mesh reads are decoded strictly (unknown and
// duplicate fields refused) into the types its informers hand out, the
// version stored being the one the Istio registry reads, whichever the
// CRDs serve was written. The checks below are those of the CRDs'
// schemas and CEL rules that keep a route from meaning anything; what
// cannot work otherwise is reported by the conversion, with the file and
// line.

// gatewayKinds are the apiVersions of each kind, the first the one
// stored.
var gatewayKinds = map[string][]string{
	string(crd.HTTPRoute):      {crd.GatewayGroup + "/v1", crd.GatewayGroup + "/v1beta1"},
	string(crd.GRPCRoute):      {crd.GatewayGroup + "/v1"},
	string(crd.ReferenceGrant): {crd.GatewayGroup + "/" + crd.GatewayGrantVersion, crd.GatewayGroup + "/v1"},
}

// decodeGatewayObject decodes and validates an object of one of the
// Gateway API kinds; status is dropped: controllers write it, not
// whoever applies the route.
func decodeGatewayObject(path string, doc document, prefix string, js []byte, kind string) (*Object, []Problem) {
	var (
		obj  any
		meta *metav1.ObjectMeta
		errs field.ErrorList
	)
	decode := func(into any) []Problem {
		strict, err := kjson.UnmarshalStrict(js, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil || len(strict) > 0 {
			return decodeProblems(path, doc, prefix, err, strict)
		}
		return nil
	}
	switch kind {
	case string(crd.HTTPRoute):
		o := &gatewayv1.HTTPRoute{}
		if p := decode(o); p != nil {
			return nil, p
		}
		o.Status = gatewayv1.HTTPRouteStatus{}
		obj, meta = o, &o.ObjectMeta
		errs = validateHTTPRoute(&o.Spec)
	case string(crd.GRPCRoute):
		o := &gatewayv1.GRPCRoute{}
		if p := decode(o); p != nil {
			return nil, p
		}
		o.Status = gatewayv1.GRPCRouteStatus{}
		obj, meta = o, &o.ObjectMeta
		errs = validateGRPCRoute(&o.Spec)
	case string(crd.ReferenceGrant):
		o := &gatewayv1beta1.ReferenceGrant{}
		if p := decode(o); p != nil {
			return nil, p
		}
		obj, meta = o, &o.ObjectMeta
	}
	if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	errs = append(apivalidation.ValidateObjectMeta(meta, true, apivalidation.NameIsDNSSubdomain, metadataPath), errs...)
	if len(errs) > 0 {
		return nil, fieldProblems(path, doc, prefix, errs)
	}
	setTypeMeta(obj, kind)
	return &Object{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Obj: obj,
		File: path, Document: doc.index, Line: doc.line, Prefix: prefix}, nil
}

func setTypeMeta(obj any, kind string) {
	tm := metav1.TypeMeta{APIVersion: gatewayKinds[kind][0], Kind: kind}
	switch o := obj.(type) {
	case *gatewayv1.HTTPRoute:
		o.TypeMeta = tm
	case *gatewayv1.GRPCRoute:
		o.TypeMeta = tm
	case *gatewayv1beta1.ReferenceGrant:
		o.TypeMeta = tm
	}
}

// A path value of an Exact or PathPrefix match holds the characters the
// CRD's pattern allows.
var pathValue = regexp.MustCompile(`^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`)

// validateHTTPRoute checks what the CRD's schema and CEL rules check of
// the fields the mesh reads: a Service backend has a port, a weight is
// within 0 and 1000000, an Exact or PathPrefix path starts with "/".
func validateHTTPRoute(spec *gatewayv1.HTTPRouteSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	errs = append(errs, validateParents(p, spec.ParentRefs)...)
	for i, r := range spec.Rules {
		rp := p.Child("rules").Index(i)
		for j, m := range r.Matches {
			if m.Path == nil || m.Path.Value == nil {
				continue
			}
			v := *m.Path.Value
			regex := m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchRegularExpression
			if !regex && (len(v) == 0 || v[0] != '/' || !pathValue.MatchString(v)) {
				errs = append(errs, field.Invalid(rp.Child("matches").Index(j).Child("path"), v, "value must be an absolute path"))
			}
		}
		for j, b := range r.BackendRefs {
			errs = append(errs, validateBackend(rp.Child("backendRefs").Index(j), b.BackendRef)...)
		}
	}
	return errs
}

func validateGRPCRoute(spec *gatewayv1.GRPCRouteSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	errs = append(errs, validateParents(p, spec.ParentRefs)...)
	for i, r := range spec.Rules {
		rp := p.Child("rules").Index(i)
		for j, m := range r.Matches {
			if m.Method != nil && m.Method.Service == nil && m.Method.Method == nil {
				errs = append(errs, field.Required(rp.Child("matches").Index(j).Child("method"), "one or both of service and method"))
			}
		}
		for j, b := range r.BackendRefs {
			errs = append(errs, validateBackend(rp.Child("backendRefs").Index(j), b.BackendRef)...)
		}
	}
	return errs
}

func validateParents(p *field.Path, refs []gatewayv1.ParentReference) field.ErrorList {
	var errs field.ErrorList
	for i, ref := range refs {
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("parentRefs").Index(i).Child("name"), ""))
		}
	}
	return errs
}

func validateBackend(p *field.Path, b gatewayv1.BackendRef) field.ErrorList {
	var errs field.ErrorList
	if b.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	service := (b.Group == nil || *b.Group == "") && (b.Kind == nil || *b.Kind == "Service")
	if service && b.Port == nil {
		errs = append(errs, field.Invalid(p, b.Name, "a Service backend needs a port"))
	}
	if w := b.Weight; w != nil && (*w < 0 || *w > 1000000) {
		errs = append(errs, field.Invalid(p.Child("weight"), *w, fmt.Sprintf("must be between 0 and %d", 1000000)))
	}
	return errs
}
