package meshconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Config is one parsed MeshConfig.
type Config struct {
	// Settings are what meshpilot applies of it.
	Settings *model.MeshSettings
	// Mesh is the MeshConfig as given (fields unknown to it left out).
	Mesh *meshv1alpha1.MeshConfig
	// DiscoverySelectors are MeshConfig's discoverySelectors, converted;
	// they are not settings generators read, but the namespaces a
	// registry keeps (see Watcher.AppendSelectorHandler).
	DiscoverySelectors []labels.Selector
	// Ignored lists, sorted, the fields given that meshpilot does not
	// apply, as JSON paths ("accessLogFile"); those unknown to MeshConfig
	// end with " (unknown field)".
	Ignored []string
}

// honoured are the MeshConfig fields meshpilot applies, by JSON path; a
// message field's own fields are listed when only some of them are.
var honoured = map[string]bool{
	"discoverySelectors":                              true,
	"defaultHttpRetryPolicy":                          true,
	"defaultHttpRetryPolicy.attempts":                 true,
	"defaultHttpRetryPolicy.retryOn":                  true,
	"defaultHttpRetryPolicy.perTryTimeout":            true,
	"defaultHttpRetryPolicy.backoff":                  true,
	"defaultHttpRetryPolicy.retryIgnorePreviousHosts": true,
	"trustDomain":                                     true,
	"trustDomainAliases":                              true,
	"rootNamespace":                                   true,
	"defaultServiceExportTo":                          true,
	"defaultVirtualServiceExportTo":                   true,
	"defaultDestinationRuleExportTo":                  true,
	"serviceSettings":                                 true,
	// failoverPriority orders endpoints by the client's labels, which
	// meshpilot does not know: it acts as Istio does for a client
	// without labels (nothing), so it is listed as ignored.
	"localityLbSetting":            true,
	"localityLbSetting.enabled":    true,
	"localityLbSetting.distribute": true,
	"localityLbSetting.failover":   true,
}

// Parse reads a MeshConfig in YAML or JSON, as Istio does
// (mesh.ApplyMeshConfig: YAML to JSON to protojson): fields unknown to
// MeshConfig are tolerated, as Istio tolerates them, and listed in
// Ignored. Syntax errors, values of the wrong type and values Istio's
// validation refuses are errors naming the field.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("syntax: %w", err)
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("syntax: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if doc != nil && !ok {
		return nil, errors.New("a MeshConfig is a mapping of fields")
	}
	mesh := &meshv1alpha1.MeshConfig{}
	if err := unmarshalOptions.Unmarshal(js, mesh); err != nil {
		// protojson's errors give a position in the JSON made from the
		// YAML, which the user never saw: name the field instead.
		if path := badField(obj, mesh.ProtoReflect().Descriptor(), ""); path != "" {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	settings, err := settingsOf(mesh)
	if err != nil {
		return nil, err
	}
	selectors, err := discoverySelectorsOf(mesh.GetDiscoverySelectors())
	if err != nil {
		return nil, err
	}
	c := &Config{Settings: settings, Mesh: mesh, DiscoverySelectors: selectors}
	ignored(obj, mesh.ProtoReflect().Descriptor(), "", &c.Ignored)
	slices.Sort(c.Ignored)
	return c, nil
}

// settingsOf picks and checks what meshpilot applies.
func settingsOf(mesh *meshv1alpha1.MeshConfig) (*model.MeshSettings, error) {
	out := model.DefaultMeshSettings()
	err := trustDomainsOf(mesh, out)
	if err != nil {
		return nil, err
	}
	if ns := mesh.GetRootNamespace(); ns != "" {
		// Istio does not check it; a name no namespace can have would
		// silently leave the mesh without mesh-wide rules.
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("rootNamespace: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out.RootNamespace = ns
	}
	if out.DefaultExportTo, err = exportDefaultsOf(mesh); err != nil {
		return nil, err
	}
	lb, err := ConvertLocalityLB(mesh.GetLocalityLbSetting())
	if err != nil {
		return nil, err
	}
	out.LocalityLB = lb
	ss, err := serviceSettingsOf(mesh.GetServiceSettings())
	if err != nil {
		return nil, err
	}
	out.ServiceSettings = ss
	if p := mesh.GetDefaultHttpRetryPolicy(); p != nil {
		r, err := ConvertHTTPRetry(p)
		if err != nil {
			return nil, fmt.Errorf("defaultHttpRetryPolicy.%w", err)
		}
		out.DefaultHTTPRetry = r
	}
	return out, nil
}

// exportDefaultsOf reads defaultServiceExportTo,
// defaultVirtualServiceExportTo and defaultDestinationRuleExportTo as
// given: each entry ".", "*", "~" or a namespace name, as an object's
// exportTo. An entry that is none would silently hide from every
// namespace what says no exportTo.
func exportDefaultsOf(mesh *meshv1alpha1.MeshConfig) (model.ExportDefaults, error) {
	out := model.ExportDefaults{
		Service:         mesh.GetDefaultServiceExportTo(),
		VirtualService:  mesh.GetDefaultVirtualServiceExportTo(),
		DestinationRule: mesh.GetDefaultDestinationRuleExportTo(),
	}
	for _, f := range []struct {
		name    string
		entries []string
	}{
		{"defaultServiceExportTo", out.Service},
		{"defaultVirtualServiceExportTo", out.VirtualService},
		{"defaultDestinationRuleExportTo", out.DestinationRule},
	} {
		for i, e := range f.entries {
			if e == "." || e == "*" || e == "~" {
				continue
			}
			if errs := validation.IsDNS1123Label(e); len(errs) > 0 {
				return out, fmt.Errorf("%s[%d]: %q is neither \".\", \"*\", \"~\" nor a namespace name", f.name, i, e)
			}
		}
	}
	return out, nil
}

// ignored appends the paths of obj's fields that meshpilot does not
// apply: unknown to the message md, or known and not honoured. It goes
// into a message field only when some of its fields are honoured.
func ignored(obj map[string]any, md protoreflect.MessageDescriptor, prefix string, out *[]string) {
	for key, v := range obj {
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		path := prefix + key
		if fd != nil {
			path = prefix + fd.JSONName()
		}
		switch {
		case fd == nil:
			*out = append(*out, path+" (unknown field)")
		case !honoured[path]:
			*out = append(*out, path)
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap() && hasHonouredFields(path):
			if sub, ok := v.(map[string]any); ok {
				ignored(sub, fd.Message(), path+".", out)
			}
		default:
			unknownIn(v, fd, path, out)
		}
	}
}

// unknownIn appends the paths of the fields unknown to MeshConfig within
// the value v of a field meshpilot applies whole, going into messages and
// lists of messages ("serviceSettings[0].settings.typo"): protojson
// drops them as Istio does, and they must not go unsaid.
func unknownIn(v any, fd protoreflect.FieldDescriptor, path string, out *[]string) {
	md := fd.Message()
	if md == nil || fd.IsMap() {
		return
	}
	values := []any{v}
	if fd.IsList() {
		values, _ = v.([]any)
	}
	for i, e := range values {
		obj, ok := e.(map[string]any)
		if !ok {
			continue
		}
		prefix := path + "."
		if fd.IsList() {
			prefix = fmt.Sprintf("%s[%d].", path, i)
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			sub := md.Fields().ByJSONName(key)
			if sub == nil {
				sub = md.Fields().ByTextName(key)
			}
			if sub == nil {
				*out = append(*out, prefix+key+" (unknown field)")
				continue
			}
			unknownIn(obj[key], sub, prefix+sub.JSONName(), out)
		}
	}
}

func hasHonouredFields(path string) bool {
	for p := range honoured {
		if len(p) > len(path) && p[:len(path)+1] == path+"." {
			return true
		}
	}
	return false
}

// unmarshalOptions tolerate unknown fields, as Istio does.
var unmarshalOptions = protojson.UnmarshalOptions{DiscardUnknown: true}

// badField finds the path of the field of obj that does not unmarshal
// into the message md, going into message fields; "" when none alone
// fails.
func badField(obj map[string]any, md protoreflect.MessageDescriptor, prefix string) string {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		one, err := json.Marshal(map[string]any{key: obj[key]})
		if err != nil {
			continue
		}
		if unmarshalOptions.Unmarshal(one, dynamicpb.NewMessage(md)) == nil {
			continue
		}
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		if sub, ok := obj[key].(map[string]any); ok && fd != nil && fd.Message() != nil && !fd.IsMap() {
			if p := badField(sub, fd.Message(), prefix+fd.JSONName()+"."); p != "" {
				return p
			}
		}
		if fd != nil {
			return prefix + fd.JSONName()
		}
		return prefix + key
	}
	return ""
}
