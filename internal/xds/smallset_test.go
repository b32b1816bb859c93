package xds

import (
	"slices"
	"testing"
)

func TestSmallSet(t *testing.T) {
	type op struct {
		add bool
		v   int
	}
	adds := func(n int) []op {
		var ops []op
		for i := range n {
			ops = append(ops, op{true, i})
		}
		return ops
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want []int
		many bool // held in the map
	}{
		{name: "empty", want: nil},
		{name: "one", ops: adds(1), want: []int{0}},
		{name: "added twice, held once", ops: []op{{true, 3}, {true, 3}}, want: []int{3}},
		{name: "up to the slice's size", ops: adds(smallSetLinear), want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "beyond it, a map", ops: adds(smallSetLinear + 1), want: []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, many: true},
		{name: "a removal from the slice", ops: append(adds(3), op{false, 0}), want: []int{1, 2}},
		{name: "a removal from the map", ops: append(adds(smallSetLinear+1), op{false, 4}), want: []int{0, 1, 2, 3, 5, 6, 7, 8}, many: true},
		{name: "removing what it lacks", ops: append(adds(2), op{false, 9}), want: []int{0, 1}},
		{name: "emptied", ops: append(adds(1), op{false, 0}), want: nil},
		{name: "a slice freed by removals takes adds again", ops: append(append(adds(smallSetLinear), op{false, 0}), op{true, 20}), want: []int{1, 2, 3, 4, 5, 6, 7, 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s smallSet[int]
			for _, o := range tc.ops {
				if o.add {
					s.add(o.v)
				} else {
					s.remove(o.v)
				}
			}
			var got []int
			s.each(func(v int) { got = append(got, v) })
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || s.len() != len(tc.want) {
				t.Errorf("holds %v (len %d), want %v", got, s.len(), tc.want)
			}
			if (s.many != nil) != tc.many {
				t.Errorf("in a map: %v, want %v", s.many != nil, tc.many)
			}
		})
	}
}

// TestSetIndex: a key's set appears with its first element and leaves
// the index with its last, whichever form (slice or map) it had.
func TestSetIndex(t *testing.T) {
	x := setIndex[string, int]{}
	for v := range 2 * smallSetLinear {
		x.add("many", v)
	}
	x.add("one", 1)
	x.add("one", 1) // again: still one element
	if got := x["one"].len(); got != 1 {
		t.Errorf(`"one" holds %d elements, want 1`, got)
	}
	if got := x["many"].len(); got != 2*smallSetLinear {
		t.Errorf(`"many" holds %d elements, want %d`, got, 2*smallSetLinear)
	}
	x.remove("absent", 1) // nothing to remove: no set appears
	x.remove("one", 1)
	for v := range 2 * smallSetLinear {
		x.remove("many", v)
	}
	if len(x) != 0 {
		t.Errorf("index holds %d keys after every element left, want 0", len(x))
	}
}
