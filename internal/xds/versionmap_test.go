package xds

import (
	"maps"
	"testing"
)

// TestVersionMap: the sorted map answers as a Go map would, whatever
// order it was built in, set and removed in.
func TestVersionMap(t *testing.T) {
	cases := []struct {
		name    string
		built   []nameVersion // added to a builder in this order
		set     map[string]string
		removed []string // sorted
		want    map[string]string
	}{
		{name: "empty", want: map[string]string{}},
		{name: "built out of order", built: []nameVersion{{"c", "3"}, {"a", "1"}, {"b", "2"}},
			want: map[string]string{"a": "1", "b": "2", "c": "3"}},
		{name: "set changes and adds", built: []nameVersion{{"a", "1"}, {"c", "3"}},
			set: map[string]string{"c": "4", "b": "2", "d": "5"}, want: map[string]string{"a": "1", "b": "2", "c": "4", "d": "5"}},
		{name: "removed, and names never held", built: []nameVersion{{"a", "1"}, {"b", "2"}, {"c", "3"}},
			removed: []string{"a", "c", "z"}, want: map[string]string{"b": "2"}},
		{name: "set and removed", built: []nameVersion{{"a", "1"}, {"b", ""}},
			set: map[string]string{"a": "2"}, removed: []string{"b"}, want: map[string]string{"a": "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newVersionMapBuilder(0)
			for _, e := range c.built {
				b.add(e.name, e.version)
			}
			m := b.done()
			// The same changes made one by one, as a subscription does.
			one := append(versionMap(nil), m...)
			for n, v := range c.set {
				one.set(n, v)
			}
			for _, n := range c.removed {
				one.remove(n)
			}
			merged := m.updated(versionMapOf(c.set), c.removed)
			for _, got := range []versionMap{merged, one} {
				if !maps.Equal(got.asMap(), c.want) || len(got) != len(c.want) {
					t.Fatalf("%v, want %v", got, c.want)
				}
				for n, v := range c.want {
					if gv, ok := got.get(n); !ok || gv != v {
						t.Fatalf("get(%q) = %q, %v; want %q", n, gv, ok, v)
					}
				}
				if _, ok := got.get("zz"); ok {
					t.Fatal("get of a name never set found it")
				}
			}
		})
	}
}
