package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// The Istio kinds are read as the API server reads them through Istio's
// CustomResourceDefinitions: any of the versions the CRDs serve (they
// share one schema), the spec checked against the schema, which is the
// spec's protobuf message. Each is stored as the v1 type of its group
// that istio.io/client-go's informers hand out, so the crd conversions
// read a folder's objects as they read a cluster's.

// istioVersions are the apiVersions Istio's CRDs serve for the traffic
// kinds, the first the one stored.
var istioVersions = []string{crd.Group + "/" + crd.Version, crd.Group + "/v1beta1", crd.Group + "/v1alpha3"}

// securityVersions are those of the security kinds: v1, and v1beta1,
// which Istio's CRDs still serve.
var securityVersions = []string{crd.SecurityGroup + "/" + crd.Version, crd.SecurityGroup + "/v1beta1"}

// istioKindVersions are the apiVersions of each Istio kind, the first the
// one stored.
func istioKindVersions(kind string) []string {
	if kind == string(crd.PeerAuthentication) || kind == string(crd.AuthorizationPolicy) {
		return securityVersions
	}
	return istioVersions
}

// istioObject is an empty object of one of the Istio kinds and its parts.
type istioObject struct {
	obj  any
	typ  *metav1.TypeMeta
	meta *metav1.ObjectMeta
	spec proto.Message
}

// istioKinds builds an empty object of each kind.
var istioKinds = map[string]func() istioObject{
	string(crd.DestinationRule): func() istioObject {
		o := &networkingv1.DestinationRule{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
	string(crd.VirtualService): func() istioObject {
		o := &networkingv1.VirtualService{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
	string(crd.ServiceEntry): func() istioObject {
		o := &networkingv1.ServiceEntry{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
	string(crd.WorkloadEntry): func() istioObject {
		o := &networkingv1.WorkloadEntry{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
	string(crd.PeerAuthentication): func() istioObject {
		o := &securityv1.PeerAuthentication{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
	string(crd.AuthorizationPolicy): func() istioObject {
		o := &securityv1.AuthorizationPolicy{}
		return istioObject{o, &o.TypeMeta, &o.ObjectMeta, &o.Spec}
	},
}

// decodeIstioObject decodes, defaults and validates an object of one of
// the Istio kinds.
func decodeIstioObject(path string, doc document, prefix string, js []byte, kind string, newObject func() istioObject) (*Object, []Problem) {
	o := newObject()
	hasSpec, problems := decodeIstio(path, doc, prefix, js, o.meta, o.spec)
	if len(problems) > 0 {
		return nil, problems
	}
	// Stored as the version the informers serve, whichever was written.
	*o.typ = metav1.TypeMeta{APIVersion: istioKindVersions(kind)[0], Kind: kind}
	if o.meta.Namespace == "" {
		o.meta.Namespace = metav1.NamespaceDefault
	}
	if errs := validateIstio(o.meta, o.spec, hasSpec); len(errs) > 0 {
		return nil, fieldProblems(path, doc, prefix, errs)
	}
	return &Object{Kind: kind, Namespace: o.meta.Namespace, Name: o.meta.Name, Obj: o.obj,
		File: path, Document: doc.index, Line: doc.line, Prefix: prefix}, nil
}

// istioEnvelope is an Istio object with its spec left as JSON. status is
// taken and dropped: it is written by istiod, not by whoever applies the
// object.
type istioEnvelope struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              json.RawMessage `json:"spec,omitempty"`
	Status            json.RawMessage `json:"status,omitempty"`
}

// decodeIstio decodes an Istio object strictly into meta and spec, and
// says whether it has a spec. The envelope goes through the same strict
// JSON decoding as the Kubernetes kinds; the spec is first walked against
// its message (checkMessage), so that unknown fields and wrong values are
// reported with their path, then decoded by Istio's own JSON decoding.
func decodeIstio(path string, doc document, prefix string, js []byte, meta *metav1.ObjectMeta, spec proto.Message) (hasSpec bool, problems []Problem) {
	var env istioEnvelope
	strict, err := kjson.UnmarshalStrict(js, &env, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 {
		return false, decodeProblems(path, doc, prefix, err, strict)
	}
	*meta = env.ObjectMeta
	specPath := field.NewPath("spec")
	raw := bytes.TrimSpace(env.Spec)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return true, fieldProblems(path, doc, prefix, field.ErrorList{field.Invalid(specPath, string(raw), err.Error())})
	}
	if errs := checkMessage(v, spec.ProtoReflect().Descriptor(), specPath); len(errs) > 0 {
		return true, fieldProblems(path, doc, prefix, errs)
	}
	// The spec's own UnmarshalJSON: Istio's decoding, as its informers'.
	if err := json.Unmarshal(raw, spec); err != nil {
		return true, fieldProblems(path, doc, prefix, field.ErrorList{field.Invalid(specPath, "", specError(err))})
	}
	return true, nil
}

// fieldProblems places field errors of one object in its file.
func fieldProblems(path string, doc document, prefix string, errs field.ErrorList) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		msg := e.ErrorBody()
		if e.Type == field.ErrorTypeForbidden && e.Detail == unknownField {
			msg = unknownField // as the other kinds say it
		}
		out = append(out, Problem{File: path, Document: doc.index, Line: doc.line, Field: joinField(prefix, e.Field), Message: msg})
	}
	return out
}

// specError drops the prefixes of the JSON decoders from an error.
func specError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return strings.TrimSpace(strings.TrimPrefix(msg, "proto:"))
}

// checkMessage compares a JSON value with the message it decodes into,
// as the CRD's structural schema does: unknown fields, values of the
// wrong JSON type, unknown enum names and two members of one oneof are
// refused with their path; so are durations (checkWellKnown).
func checkMessage(v any, md protoreflect.MessageDescriptor, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return checkWellKnown(v, md, path)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(path, jsonText(v), "must be an object")}
	}
	var errs field.ErrorList
	oneofs := map[protoreflect.FullName]string{}
	for _, k := range sortedKeys(obj) {
		// JSON names only: the CRDs' schemas know no proto names
		// (export_to), which Istio's decoding would take.
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			errs = append(errs, field.Forbidden(path.Child(k), unknownField))
			continue
		}
		val := obj[k]
		if val == nil {
			continue
		}
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if first, set := oneofs[o.FullName()]; set {
				errs = append(errs, field.Forbidden(path, fmt.Sprintf("only one of %s may be set: both %s and %s are", oneofNames(o), first, k)))
				continue
			}
			oneofs[o.FullName()] = k
		}
		errs = append(errs, checkField(val, fd, path.Child(k))...)
	}
	return errs
}

func checkField(v any, fd protoreflect.FieldDescriptor, path *field.Path) field.ErrorList {
	switch {
	case fd.IsList():
		list, ok := v.([]any)
		if !ok {
			return field.ErrorList{field.Invalid(path, jsonText(v), "must be a list")}
		}
		var errs field.ErrorList
		for i, item := range list {
			errs = append(errs, checkValue(item, fd, path.Index(i))...)
		}
		return errs
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.Invalid(path, jsonText(v), "must be an object")}
		}
		var errs field.ErrorList
		// A key is a child, as the API server writes the paths of a
		// custom resource: spec.subsets[0].labels.version.
		for _, k := range sortedKeys(m) {
			errs = append(errs, checkValue(m[k], fd.MapValue(), path.Child(k))...)
		}
		return errs
	}
	return checkValue(v, fd, path)
}

// checkValue checks one value of a field (an item, for a list).
func checkValue(v any, fd protoreflect.FieldDescriptor, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	bad := func(want string) field.ErrorList {
		return field.ErrorList{field.Invalid(path, jsonText(v), "must be "+want)}
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(v, fd.Message(), path)
	case protoreflect.EnumKind:
		// By name only: the CRDs' schemas list the names, and the API
		// server refuses numbers that Istio's decoding would take.
		if e, ok := v.(string); !ok || fd.Enum().Values().ByName(protoreflect.Name(e)) == nil {
			return field.ErrorList{field.NotSupported(path, jsonText(v), enumNames(fd.Enum()))}
		}
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return bad("true or false")
		}
	case protoreflect.StringKind, protoreflect.BytesKind:
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if _, ok := v.(json.Number); !ok {
			return bad("a number")
		}
	default: // the integer kinds
		return checkInteger(v, fd.Kind(), path)
	}
	return nil
}

// checkInteger: an integer within the range of its kind. The CRDs'
// schemas say integer, so the API server refuses the quoted numbers that
// Istio's decoding would take.
func checkInteger(v any, kind protoreflect.Kind, path *field.Path) field.ErrorList {
	n, ok := v.(json.Number)
	if !ok {
		return field.ErrorList{field.Invalid(path, jsonText(v), "must be an integer")}
	}
	text := n.String()
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	switch kind {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		lo, hi = 0, math.MaxUint32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		lo, hi = math.MinInt64, math.MaxInt64
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if _, err := strconv.ParseUint(text, 10, 64); err != nil {
			return field.ErrorList{field.Invalid(path, jsonText(v), "must be an integer from 0 to 18446744073709551615")}
		}
		return nil
	}
	i, err := strconv.ParseInt(text, 10, 64)
	if err != nil || i < lo || i > hi {
		return field.ErrorList{field.Invalid(path, jsonText(v), fmt.Sprintf("must be an integer from %d to %d", lo, hi))}
	}
	return nil
}

const unknownField = "unknown field"

// minDuration is the shortest duration Istio's CRDs accept: each
// duration field carries the rule duration(self) >= duration('1ms').
const minDuration = time.Millisecond

// checkWellKnown checks a value of a well-known type as Istio decodes it
// (golang/protobuf's jsonpb, which its generated UnmarshalJSON uses): a
// Duration as Go and CEL write durations ("1.5s", "500ms"), a wrapper as
// its value; anything else is left to the decoding of the whole spec.
func checkWellKnown(v any, md protoreflect.MessageDescriptor, path *field.Path) field.ErrorList {
	switch md.FullName() {
	case "google.protobuf.Duration":
		s, ok := v.(string)
		d, err := time.ParseDuration(s)
		if !ok || err != nil || d < minDuration {
			return field.ErrorList{field.Invalid(path, jsonText(v), "must be a valid duration greater than 1ms")}
		}
		return nil
	}
	if strings.HasSuffix(string(md.Name()), "Value") {
		if fd := md.Fields().ByName("value"); fd != nil && md.Fields().Len() == 1 {
			return checkValue(v, fd, path)
		}
	}
	return nil
}

func enumNames(ed protoreflect.EnumDescriptor) []string {
	vals := ed.Values()
	out := make([]string, 0, vals.Len())
	for i := range vals.Len() {
		out = append(out, string(vals.Get(i).Name()))
	}
	return out
}

func oneofNames(o protoreflect.OneofDescriptor) string {
	fields := o.Fields()
	names := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		names = append(names, fields.Get(i).JSONName())
	}
	return strings.Join(names, ", ")
}

// jsonText is a value as the file wrote it, for messages.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
