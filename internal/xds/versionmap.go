package xds

import (
	"slices"
	"strings"
)

// versionMap maps resource names to versions: what a stream was sent of
// a type (subscription.returned). It is a slice sorted by name rather
// than a map: every open stream keeps one per type, most of a few
// names, and a Go map of five costs about twice the slice (370 bytes
// against 160), which at ten thousand streams of four types is 8 MB of
// live heap. Lookups are binary searches; a response builds its next
// map whole (versionMapBuilder), so no insertion shifts the slice.
type versionMap []nameVersion

type nameVersion struct{ name, version string }

func compareNames(a, b nameVersion) int { return strings.Compare(a.name, b.name) }

func (m versionMap) find(name string) (int, bool) {
	return slices.BinarySearchFunc(m, name, func(e nameVersion, n string) int { return strings.Compare(e.name, n) })
}

// get is name's version and whether the map holds name.
func (m versionMap) get(name string) (string, bool) {
	if i, ok := m.find(name); ok {
		return m[i].version, true
	}
	return "", false
}

// set sets name's version.
func (m *versionMap) set(name, version string) {
	i, ok := m.find(name)
	if ok {
		(*m)[i].version = version
		return
	}
	*m = slices.Insert(*m, i, nameVersion{name, version})
}

// remove forgets name.
func (m *versionMap) remove(name string) {
	if i, ok := m.find(name); ok {
		*m = slices.Delete(*m, i, i+1)
	}
}

// keepOnly forgets the names keep refuses.
func (m *versionMap) keepOnly(keep func(name string) bool) {
	*m = slices.DeleteFunc(*m, func(e nameVersion) bool { return !keep(e.name) })
}

// versionMapOf is m as a versionMap.
func versionMapOf(m map[string]string) versionMap {
	if len(m) == 0 {
		return nil
	}
	out := make(versionMap, 0, len(m))
	for n, v := range m {
		out = append(out, nameVersion{n, v})
	}
	slices.SortFunc(out, compareNames)
	return out
}

// versionMapBuilder builds a versionMap from names added once each, in
// any order.
type versionMapBuilder struct{ m versionMap }

func newVersionMapBuilder(n int) versionMapBuilder {
	return versionMapBuilder{m: make(versionMap, 0, n)}
}

func (b *versionMapBuilder) add(name, version string) {
	b.m = append(b.m, nameVersion{name, version})
}

// done is the map built; the builder is not used after it. Names added
// in order, as subscriptions hold them, need no sort.
func (b *versionMapBuilder) done() versionMap {
	if !slices.IsSortedFunc(b.m, compareNames) {
		slices.SortFunc(b.m, compareNames)
	}
	return slices.Clip(b.m)
}

// updated is a new map: m with set's versions (set sorted, as done
// makes it) and without the names in removed (sorted), in one merge.
func (m versionMap) updated(set versionMap, removed []string) versionMap {
	out := make(versionMap, 0, len(m)+len(set))
	i, j := 0, 0
	for i < len(m) || j < len(set) {
		var e nameVersion
		switch {
		case j == len(set) || (i < len(m) && m[i].name < set[j].name):
			e = m[i]
			i++
		case i == len(m) || set[j].name < m[i].name:
			e = set[j]
			j++
		default: // the same name: set's version
			e = set[j]
			i++
			j++
		}
		if _, gone := slices.BinarySearch(removed, e.name); !gone {
			out = append(out, e)
		}
	}
	return slices.Clip(out)
}
