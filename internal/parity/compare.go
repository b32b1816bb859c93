package parity

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
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
	// Why we differ, for the reader of the list.
	Why string `json:"why"`

	segments []string
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
		if list[i].Path == "" || list[i].Why == "" {
			return nil, fmt.Errorf("%s: entry %d: a path and why are both required", path, i+1)
		}
		list[i].segments = strings.Split(list[i].Path, ".")
	}
	return list, nil
}

func (in *Intended) appliesTo(typ, kind string) bool {
	return (len(in.Types) == 0 || slices.Contains(in.Types, typ)) && (len(in.Kinds) == 0 || slices.Contains(in.Kinds, kind))
}

// strip removes what the intended differences cover from a resource, and
// reports how many fields it removed.
func strip(v any, list []Intended, typ, kind string) int {
	n := 0
	for i := range list {
		if list[i].appliesTo(typ, kind) {
			n += remove(v, list[i].segments)
		}
	}
	return n
}

func remove(v any, path []string) int {
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
				delete(x, k)
				n++
				continue
			}
			if m := remove(child, path[1:]); m > 0 {
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
				n += remove(child, path[1:])
			} else {
				n += remove(child, path)
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
