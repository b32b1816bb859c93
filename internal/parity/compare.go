package parity

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	pathpkg "path"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Intended is a difference between istiod and meshpilot that is known and
// meant: the fields at Path are left out of both sides before comparing.
type Intended struct {
	// Path is a field path in Envoy's names, "." between fields; "*"
	// stands for any one field name or list index.
	Path string `json:"path"`
	// Types limits it to some types ("clusters", "endpoints",
	// "listeners", "routes"); Kinds to "grpc" or "envoy" clients. Empty:
	// all.
	Types []string `json:"types,omitempty"`
	Kinds []string `json:"kinds,omitempty"`
	// Value, when set, limits it to fields holding that value (JSON):
	// istiod writing a default out, where leaving it out means the same.
	Value any `json:"value,omitempty"`
	// RenameTo, when set, moves the field at Path there instead of
	// leaving it out: the same setting in another field that both
	// clients read, so that what it holds is still compared.
	RenameTo string `json:"renameTo,omitempty"`
	// Resource, with no Path, is a pattern (path.Match) of the names of
	// resources that only one server sends (SentBy: "istiod" or
	// "meshpilot") and that are left out.
	Resource string `json:"resource,omitempty"`
	SentBy   string `json:"sentBy,omitempty"`
	// Empty limits a resource entry to resources that hold nothing but
	// their name.
	Empty bool `json:"empty,omitempty"`
	// Why we differ, for the reader of the list.
	Why string `json:"why"`

	segments, renamed []string
}

// LoadIntended reads the list of intended differences.
func LoadIntended(path string) ([]Intended, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []Intended
	if err := yaml.UnmarshalStrict(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range list {
		e := &list[i]
		switch {
		case e.Why == "":
			return nil, fmt.Errorf("%s: entry %d: why is required", path, i+1)
		case e.Path == "" && (e.Resource == "" || e.SentBy != "istiod" && e.SentBy != "meshpilot"):
			return nil, fmt.Errorf("%s: entry %d: a path, or a resource with sentBy istiod or meshpilot, is required", path, i+1)
		case e.Resource != "":
			if _, err := pathpkg.Match(e.Resource, ""); err != nil {
				return nil, fmt.Errorf("%s: entry %d: resource: %w", path, i+1, err)
			}
		}
		if e.Path != "" {
			e.segments = strings.Split(e.Path, ".")
		}
		if e.RenameTo != "" {
			e.renamed = strings.Split(e.RenameTo, ".")
		}
	}
	return list, nil
}

// oneSided reports whether a resource only one server sent is an
// intended difference.
func oneSided(list []Intended, typ, kind, name, sentBy string, res any) bool {
	for i := range list {
		e := &list[i]
		if e.Path != "" || e.SentBy != sentBy || !e.appliesTo(typ, kind) || e.Empty && !nameOnly(res) {
			continue
		}
		if ok, _ := pathpkg.Match(e.Resource, name); ok {
			return true
		}
	}
	return false
}

// nameOnly reports whether a resource holds nothing but its name.
func nameOnly(res any) bool {
	m, ok := res.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if k != "name" && k != "cluster_name" {
			return false
		}
	}
	return true
}

func (in *Intended) appliesTo(typ, kind string) bool {
	return (len(in.Types) == 0 || slices.Contains(in.Types, typ)) && (len(in.Kinds) == 0 || slices.Contains(in.Kinds, kind))
}

// strip removes what the intended differences cover from a resource, and
// reports how many fields it removed.
func strip(v any, list []Intended, typ, kind string) int {
	n := 0
	for i := range list {
		e := &list[i]
		if e.Path == "" || !e.appliesTo(typ, kind) {
			continue
		}
		if e.renamed != nil {
			n += rename(v, e.segments, e.renamed)
			continue
		}
		n += remove(v, e.segments, e.Value)
	}
	return n
}

// rename moves the value at from (no "*") to to, within one resource.
func rename(v any, from, to []string) int {
	parent := lookup(v, from[:len(from)-1])
	if parent == nil {
		return 0
	}
	val, ok := parent[from[len(from)-1]]
	if !ok {
		return 0
	}
	delete(parent, from[len(from)-1])
	pruneEmpty(v, from[:len(from)-1])
	dst, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	for _, k := range to[:len(to)-1] {
		next, ok := dst[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			dst[k] = next
		}
		dst = next
	}
	dst[to[len(to)-1]] = val
	return 1
}

// pruneEmpty removes the maps along path that were left empty.
func pruneEmpty(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	pruneEmpty(m[path[0]], path[1:])
	if c, ok := m[path[0]].(map[string]any); ok && len(c) == 0 {
		delete(m, path[0])
	}
}

func lookup(v any, path []string) map[string]any {
	m, ok := v.(map[string]any)
	for _, k := range path {
		if !ok {
			return nil
		}
		m, ok = m[k].(map[string]any)
	}
	if !ok {
		return nil
	}
	return m
}

func remove(v any, path []string, value any) int {
	if len(path) == 0 {
		return 0
	}
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if path[0] != "*" && path[0] != k {
				continue
			}
			if len(path) == 1 {
				if value == nil || equalJSON(value, child) {
					delete(x, k)
					n++
				}
				continue
			}
			if m := remove(child, path[1:], value); m > 0 {
				n += m
				// What held only the fields left out goes too: the
				// other server never sent it.
				if c, ok := child.(map[string]any); ok && len(c) == 0 {
					delete(x, k)
				}
			}
		}
	case []any:
		for _, child := range x {
			// A list's elements are reached by "*", and a field name
			// looks into every element, as the list were the element.
			if path[0] == "*" {
				n += remove(child, path[1:], value)
			} else {
				n += remove(child, path, value)
			}
		}
	}
	return n
}

// Difference is one field where the two servers' answers differ.
type Difference struct {
	Client, Type, Name string
	// Path is the field's; empty for a resource one server sent and the
	// other did not.
	Path              string
	Istiod, Meshpilot string
}

func (d Difference) String() string {
	where := fmt.Sprintf("%s %s %s", d.Client, d.Type, d.Name)
	if d.Path != "" {
		where += ": " + d.Path
	}
	return fmt.Sprintf("%s\n      istiod:    %s\n      meshpilot: %s", where, d.Istiod, d.Meshpilot)
}

// diff lists the fields where a and b differ, a being istiod's.
func diff(path string, a, b any, out []Difference) []Difference {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			out = diff(join(path, k), am[k], bm[k], out)
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			out = diff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return out
	}
	if equalJSON(a, b) {
		return out
	}
	return append(out, Difference{Path: path, Istiod: show(a), Meshpilot: show(b)})
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// show prints a value on one line, cut to a length a report can hold.
func show(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, _ := json.Marshal(v)
	const max = 300
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}
