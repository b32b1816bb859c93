package kubeconv

import (
	"runtime"
	"sync"
	"weak"
)

// weakTable finds the one shared value of each content, keyed by a
// canonical form of it. It holds values weakly: a value lives while
// something else holds it, and its entry leaves the table once it is
// collected, so that what deleted objects shared goes with them. Safe
// for concurrent use.
type weakTable[T any] struct {
	mu      sync.Mutex // guards entries
	entries map[string]weak.Pointer[T]
}

func newWeakTable[T any]() *weakTable[T] {
	return &weakTable[T]{entries: map[string]weak.Pointer[T]{}}
}

// get returns the live value of key, or the one build makes, which the
// table then remembers. build runs only when no value of key lives: most
// callers find one.
func (t *weakTable[T]) get(key []byte, build func() *T) *T {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.entries[string(key)].Value(); v != nil {
		return v
	}
	v := build()
	k := string(key)
	t.entries[k] = weak.Make(v)
	runtime.AddCleanup(v, t.forget, k)
	return v
}

// forget drops the entry of a collected value, unless a new value took
// its key meanwhile.
func (t *weakTable[T]) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.entries[key]; ok && wp.Value() == nil {
		delete(t.entries, key)
	}
}

// len is the number of entries, collected values not yet forgotten
// included.
func (t *weakTable[T]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
