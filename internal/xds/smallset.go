package xds

import "slices"

// smallSet is a set that holds its elements in a slice up to
// smallSetLinear, in a map beyond. An index of sets by key, where most
// sets hold one to a few elements and a few hold thousands, then costs
// a slice per key instead of a map, which takes a couple of hundred
// bytes however little it holds. The zero value is an empty set.
type smallSet[T comparable] struct {
	few  []T
	many map[T]struct{} // once it held more than smallSetLinear; few is nil then
}

const smallSetLinear = 8

func (s *smallSet[T]) add(v T) {
	switch {
	case s.many != nil:
		s.many[v] = struct{}{}
	case slices.Contains(s.few, v):
	case len(s.few) < smallSetLinear:
		s.few = append(s.few, v)
	default:
		s.many = make(map[T]struct{}, 2*smallSetLinear)
		for _, o := range s.few {
			s.many[o] = struct{}{}
		}
		s.many[v] = struct{}{}
		s.few = nil
	}
}

func (s *smallSet[T]) remove(v T) {
	if s.many != nil {
		delete(s.many, v)
		return
	}
	if i := slices.Index(s.few, v); i >= 0 {
		last := len(s.few) - 1
		var zero T
		s.few[i], s.few[last] = s.few[last], zero
		s.few = s.few[:last]
	}
}

func (s *smallSet[T]) len() int { return len(s.few) + len(s.many) }

// each calls f for every element; f must not change the set.
func (s *smallSet[T]) each(f func(T)) {
	for _, v := range s.few {
		f(v)
	}
	for v := range s.many {
		f(v)
	}
}

// setIndex indexes small sets by key: a key's set exists while it holds
// an element.
type setIndex[K comparable, T comparable] map[K]*smallSet[T]

// add puts v in k's set, making the set when k has none.
func (x setIndex[K, T]) add(k K, v T) {
	s := x[k]
	if s == nil {
		s = &smallSet[T]{}
		x[k] = s
	}
	s.add(v)
}

// remove takes v out of k's set, and the set out of the index once
// empty.
func (x setIndex[K, T]) remove(k K, v T) {
	if s := x[k]; s != nil {
		s.remove(v)
		if s.len() == 0 {
			delete(x, k)
		}
	}
}
