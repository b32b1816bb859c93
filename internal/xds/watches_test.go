package xds

import (
	"maps"
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestWatchIndex: registrations filed under shared dependency lists are found
// by every key of their lists, and once removed leave nothing in the
// index, whatever lists they shared or named twice.
func TestWatchIndex(t *testing.T) {
	a, b, c := model.ServiceKey("a"), model.ServiceKey("b"), model.MeshRetryKey
	la := []model.ConfigKey{a, c}
	lb := []model.ConfigKey{b, c}
	lb2 := []model.ConfigKey{b} // the same key in another list
	ws := map[string]*registration{
		"a":     {deps: [][]model.ConfigKey{la}},
		"ab":    {deps: [][]model.ConfigKey{la, lb}},
		"b2":    {deps: [][]model.ConfigKey{lb2}},
		"twice": {deps: [][]model.ConfigKey{lb, lb}},
	}
	cases := []struct {
		name    string
		indexed []string
		key     model.ConfigKey
		want    []string
	}{
		{"one list", []string{"a"}, a, []string{"a"}},
		{"shared list", []string{"a", "ab"}, a, []string{"a", "ab"}},
		{"shared key", []string{"a", "ab", "b2", "twice"}, c, []string{"a", "ab", "twice"}},
		{"key in two lists", []string{"ab", "b2"}, b, []string{"ab", "b2"}},
		{"list named twice", []string{"twice"}, b, []string{"twice"}},
		{"nobody", []string{"a"}, b, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := newWatchIndex()
			for _, n := range tc.indexed {
				x.add(ws[n])
			}
			found := map[*registration]struct{}{}
			x.collect(tc.key, found)
			var got []string
			for n, w := range ws {
				if _, ok := found[w]; ok {
					got = append(got, n)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
			all := map[*registration]struct{}{}
			x.all(all)
			if len(all) != len(tc.indexed) {
				t.Fatalf("all: %d watches, want %d", len(all), len(tc.indexed))
			}
			for _, n := range tc.indexed {
				x.remove(ws[n])
			}
			if len(x.byKey) != 0 || len(x.byList) != 0 {
				t.Fatalf("left behind: keys %v, lists %d", slices.Collect(maps.Keys(x.byKey)), len(x.byList))
			}
		})
	}
}
