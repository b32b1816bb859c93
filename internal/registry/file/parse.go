package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Problem is one thing wrong with a manifest file: where it is (file,
// document, field) and what is wrong.
type Problem struct {
	// File is the manifest's path.
	File string
	// Document is the 1-based index of the document in the file, counting
	// only documents that hold something; 0 for the file as a whole.
	Document int
	// Line is the first line of the document in the file (1-based), or 0.
	Line int
	// Field is the path of the offending field, e.g. "spec.ports[0].port";
	// empty when the document as a whole is wrong.
	Field string
	// Message says what is wrong.
	Message string

	// duplicate marks an object already defined in an earlier file: it
	// is ignored, the rest of its file is used.
	duplicate bool
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Document > 0 {
		fmt.Fprintf(&b, ": document %d", p.Document)
		if p.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", p.Line)
		}
	}
	if p.Field != "" {
		b.WriteString(": ")
		b.WriteString(p.Field)
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}

// Kinds this registry reads, with the apiVersion each must carry.
var kindVersions = map[string]string{
	"Namespace":     "v1",
	"Service":       "v1",
	"Pod":           "v1",
	"Node":          "v1",
	"EndpointSlice": "discovery.k8s.io/v1",
}

const supportedKinds = "Namespace, Service, EndpointSlice, Pod, Node, DestinationRule, VirtualService, ServiceEntry, WorkloadEntry, PeerAuthentication, AuthorizationPolicy, HTTPRoute, GRPCRoute, ReferenceGrant (or a v1 List of them)"

// Object is one Kubernetes object read from a file, already defaulted
// and validated.
type Object struct {
	Kind      string
	Namespace string // empty for cluster-scoped kinds
	Name      string
	// Obj is *corev1.Namespace, *corev1.Service, *corev1.Pod,
	// *corev1.Node, *discoveryv1.EndpointSlice, or one of the Istio kinds
	// of istio.io/client-go's networking/v1 or security/v1 (istio_decode.go).
	Obj any
	// Where the object came from, for messages.
	File     string
	Document int
	Line     int
	// Field prefix inside the document ("items[2]" for a List item).
	Prefix string
}

type objectKey struct{ kind, namespace, name string }

func (o *Object) key() objectKey { return objectKey{o.Kind, o.Namespace, o.Name} }

func (o *Object) describe() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

func (o *Object) where() string {
	s := fmt.Sprintf("%s document %d", o.File, o.Document)
	if o.Prefix != "" {
		s += " " + o.Prefix
	}
	return s
}

// document is one YAML document of a file.
type document struct {
	index int // 1-based among non-empty documents
	line  int // first line, 1-based
	data  []byte
}

var separator = regexp.MustCompile(`^---(\s.*)?$`)

// splitDocuments cuts a YAML stream at "---" lines and drops documents
// that hold only blank lines and comments.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, line := 1, 0
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, document{index: len(docs) + 1, line: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
	}
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		trimmed := bytes.TrimRight(l, "\r\n")
		if separator.Match(trimmed) {
			flush()
			start = line + 1
			continue
		}
		if bytes.Equal(trimmed, []byte("...")) {
			continue
		}
		if cur.Len() == 0 && !hasContent(l) {
			// Leading blank or comment lines: the document starts later.
			start = line + 1
			continue
		}
		cur.Write(l)
	}
	flush()
	return docs
}

func hasContent(b []byte) bool {
	for _, l := range bytes.Split(b, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return true
		}
	}
	return false
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// ParseFile reads every object of one manifest file (YAML with any number
// of documents, or JSON), defaults and validates each. It returns the
// objects when the file is entirely valid, else the problems: a file is
// used whole or not at all.
func ParseFile(path string, data []byte) ([]*Object, []Problem) {
	var objs []*Object
	var problems []Problem
	for _, doc := range splitDocuments(data) {
		o, p := parseDocument(path, doc)
		objs = append(objs, o...)
		problems = append(problems, p...)
	}
	problems = append(problems, duplicatesInFile(objs)...)
	if len(problems) > 0 {
		return nil, problems
	}
	return objs, nil
}

func parseDocument(path string, doc document) ([]*Object, []Problem) {
	problem := func(fld, format string, args ...any) []Problem {
		return []Problem{{File: path, Document: doc.index, Line: doc.line, Field: fld, Message: fmt.Sprintf(format, args...)}}
	}
	js, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		// Line numbers of the YAML parser count from the document's start.
		msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(s string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
			return fmt.Sprintf("line %d", n+doc.line-1)
		})
		msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
		return nil, problem("", "not valid YAML or JSON: %s", msg)
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || js[0] != '{' {
		return nil, problem("", "must be an object with apiVersion, kind and metadata")
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, problem("", "%v", err)
	}
	if tm.Kind == "List" {
		var list struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   json.RawMessage   `json:"metadata"`
			Items      []json.RawMessage `json:"items"`
		}
		if strict, err := kjson.UnmarshalStrict(js, &list, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields); err != nil || len(strict) > 0 {
			return nil, decodeProblems(path, doc, "", err, strict)
		}
		var objs []*Object
		var problems []Problem
		for i, item := range list.Items {
			o, p := decodeObject(path, doc, fmt.Sprintf("items[%d]", i), item)
			if o != nil {
				objs = append(objs, o)
			}
			problems = append(problems, p...)
		}
		return objs, problems
	}
	o, p := decodeObject(path, doc, "", js)
	if o == nil {
		return nil, p
	}
	return []*Object{o}, p
}

func joinField(prefix, fld string) string {
	switch {
	case prefix == "":
		return fld
	case fld == "":
		return prefix
	}
	return prefix + "." + fld
}

var typeError = regexp.MustCompile(`cannot unmarshal (\S+) into Go struct field \w+\.(\S+) of type (\S+)`)

func decodeProblems(path string, doc document, prefix string, err error, strict []error) []Problem {
	var out []Problem
	add := func(fld, msg string) {
		out = append(out, Problem{File: path, Document: doc.index, Line: doc.line, Field: joinField(prefix, fld), Message: msg})
	}
	if err != nil {
		if m := typeError.FindStringSubmatch(err.Error()); m != nil {
			msg := fmt.Sprintf("must be of type %s, not %s", m[3], m[1])
			if m[1] == "bool" && m[3] == "string" {
				msg += ` (YAML reads unquoted y, n, yes, no, on, off, true and false as booleans: quote the value)`
			}
			add(m[2], msg)
		} else {
			add("", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	for _, e := range strict {
		var fe kjson.FieldError
		if ok := asFieldError(e, &fe); ok {
			msg := e.Error()
			switch {
			case strings.HasPrefix(msg, "unknown field"):
				msg = "unknown field"
			case strings.HasPrefix(msg, "duplicate field"):
				msg = "duplicate field"
			}
			add(fe.FieldPath(), msg)
			continue
		}
		add("", e.Error())
	}
	return out
}

func asFieldError(err error, out *kjson.FieldError) bool {
	fe, ok := err.(kjson.FieldError)
	if ok {
		*out = fe
	}
	return ok
}

// decodeObject decodes one object strictly (unknown and duplicate fields
// are errors, as kubectl's strict field validation makes them), defaults
// its namespace and validates it.
func decodeObject(path string, doc document, prefix string, js []byte) (*Object, []Problem) {
	problem := func(fld, format string, args ...any) []Problem {
		return []Problem{{File: path, Document: doc.index, Line: doc.line, Field: joinField(prefix, fld), Message: fmt.Sprintf(format, args...)}}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, problem("", "%v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if tm.Kind == "" {
		return nil, problem("kind", "Required value: every object needs a kind (%s)", supportedKinds)
	}
	versions := []string{kindVersions[tm.Kind]}
	newIstio, isIstio := istioKinds[tm.Kind]
	gatewayVersions, isGateway := gatewayKinds[tm.Kind]
	switch {
	case isIstio:
		versions = istioKindVersions(tm.Kind)
	case isGateway:
		versions = gatewayVersions
	case versions[0] == "":
		return nil, problem("kind", "Unsupported value: %q: supported kinds are %s", tm.Kind, supportedKinds)
	}
	if !slices.Contains(versions, tm.APIVersion) {
		want := fmt.Sprintf("%q", versions[0])
		if len(versions) > 1 {
			want = fmt.Sprintf("one of %q", versions)
		}
		if tm.APIVersion == "" {
			return nil, problem("apiVersion", "Required value: a %s needs apiVersion %s", tm.Kind, want)
		}
		return nil, problem("apiVersion", "Unsupported value: %q: a %s needs apiVersion %s", tm.APIVersion, tm.Kind, want)
	}
	if isIstio {
		return decodeIstioObject(path, doc, prefix, js, tm.Kind, newIstio)
	}
	if isGateway {
		return decodeGatewayObject(path, doc, prefix, js, tm.Kind)
	}

	var (
		obj        any
		meta       *metav1.ObjectMeta
		namespaced = true
	)
	switch tm.Kind {
	case "Namespace":
		o := &corev1.Namespace{}
		obj, meta, namespaced = o, &o.ObjectMeta, false
	case "Service":
		o := &corev1.Service{}
		obj, meta = o, &o.ObjectMeta
	case "Pod":
		o := &corev1.Pod{}
		obj, meta = o, &o.ObjectMeta
	case "Node":
		o := &corev1.Node{}
		obj, meta, namespaced = o, &o.ObjectMeta, false
	case "EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		obj, meta = o, &o.ObjectMeta
	}
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil || len(strict) > 0 {
		return nil, decodeProblems(path, doc, prefix, err, strict)
	}
	if namespaced && meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}

	var errs field.ErrorList
	switch o := obj.(type) {
	case *corev1.Namespace:
		errs = validateNamespace(o)
	case *corev1.Service:
		errs = validateService(o)
	case *corev1.Pod:
		errs = validatePod(o)
	case *corev1.Node:
		errs = validateNode(o)
	case *discoveryv1.EndpointSlice:
		errs = validateEndpointSlice(o)
	}
	if len(errs) > 0 {
		out := make([]Problem, 0, len(errs))
		for _, e := range errs {
			out = append(out, Problem{File: path, Document: doc.index, Line: doc.line,
				Field: joinField(prefix, e.Field), Message: e.ErrorBody()})
		}
		return nil, out
	}
	o := &Object{Kind: tm.Kind, Name: meta.Name, Obj: obj, File: path, Document: doc.index, Line: doc.line, Prefix: prefix}
	if namespaced {
		o.Namespace = meta.Namespace
	}
	return o, nil
}

// duplicatesInFile reports objects defined twice in one file. The API
// server would apply the second over the first; here it is a mistake to
// fix rather than a silent override.
func duplicatesInFile(objs []*Object) []Problem {
	seen := map[objectKey]*Object{}
	var out []Problem
	for _, o := range objs {
		if first, ok := seen[o.key()]; ok {
			out = append(out, Problem{File: o.File, Document: o.Document, Line: o.Line, Field: joinField(o.Prefix, "metadata.name"),
				Message: fmt.Sprintf("Duplicate value: %q: %s is already defined in document %d", o.Name, o.describe(), first.Document)})
			continue
		}
		seen[o.key()] = o
	}
	return out
}
