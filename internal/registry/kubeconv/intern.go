package kubeconv

import "sync"

// Decoding gives every object its own copy of every string, while many
// strings repeat across the objects an informer caches: the namespace of
// each object, the node, zone and service account of each Pod and slice
// endpoint, port names. The transforms replace those with one shared
// copy, which the model's endpoints then share too (they take their
// strings from the cached objects).
//
// Go's unique package is not used: unique.Make(s).Value() keeps its
// canonical copy only while some unique.Handle lives, and the caches and
// the model hold strings, not handles, so every garbage collection would
// start a new copy.

// maxInterned bounds each table. Names of deleted namespaces and nodes
// stay in a table until it is full, then the table starts afresh: what
// was shared stays shared, and only later objects get new copies. Only
// names whose number grows with the cluster's namespaces, nodes and
// zones, never with its Pods, are interned, so the bound is seldom met.
const maxInterned = 1 << 14

// stringTable holds one copy of each string given to it. Safe for
// concurrent use: every informer's transform runs on its own goroutine.
type stringTable struct {
	mu   sync.Mutex // guards strs and ptrs
	strs map[string]string
	ptrs map[string]*string
}

// names is the table the transforms intern into.
var names = &stringTable{}

// str returns a shared copy of s.
func (t *stringTable) str(s string) string {
	if s == "" {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.strs[s]; ok {
		return v
	}
	if t.strs == nil || len(t.strs) >= maxInterned {
		t.strs = make(map[string]string)
	}
	t.strs[s] = s
	return s
}

// ptr returns a shared pointer to a shared copy of *p; nil stays nil.
// The pointer is shared by every object that holds the same value, so,
// like everything in an informer cache, what it points to must never be
// modified.
func (t *stringTable) ptr(p *string) *string {
	if p == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.ptrs[*p]; ok {
		return v
	}
	if t.ptrs == nil || len(t.ptrs) >= maxInterned {
		t.ptrs = make(map[string]*string)
	}
	v := new(*p)
	t.ptrs[*p] = v
	return v
}

// Shared pointers to the two booleans, for the conditions of slice
// endpoints: three pointers each, read only.
var (
	sharedTrue  = new(true)
	sharedFalse = new(false)
)

// boolPtr returns a shared pointer to *p; nil stays nil.
func boolPtr(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return sharedTrue
	}
	return sharedFalse
}
