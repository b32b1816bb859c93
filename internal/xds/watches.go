package xds

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// watch is one open request of one stream for one type: the stream waits
// for at most one response to it. Its fields after the first group are
// guarded by Server.mu.
//
// A watch keeps nothing of the request that opened it but whether it
// answers no earlier response: the type's subscription (ts.sub) holds
// the names, and a request's own copy of them would be a second copy per
// stream.
type watch struct {
	typ int // index of the type's generator
	// client is shared by the stream's watches and never changed: a
	// new node makes a new one (xdsStream.clientOf).
	client *Client
	stream *xdsStream
	ts     *typeState
	delta  bool
	// initial: the request acknowledged no response (an empty nonce),
	// so the client is answered even when it lacks nothing.
	initial bool
	// wildcard: the watch covers every resource of its type (AllNames).
	wildcard bool

	// deps are the model keys of what the watch covers, as of its latest
	// evaluation: each covered resource's list, shared with its cache
	// entry (entry.deps), rather than a copy of them all per watch (a
	// kilobyte for a client of five services); a key may be in several.
	// kinds is the set of their kinds (for wildcard watches, which are
	// found by kind, not by key).
	deps  [][]model.ConfigKey
	kinds kindSet
	// indexed: the watch is in the watch index; done: it was answered or
	// cancelled and never will be again.
	indexed, done bool
}

// kindSet is a set of model.KeyKinds.
type kindSet uint32

func (s *kindSet) add(k model.KeyKind)      { *s |= 1 << k }
func (s kindSet) has(k model.KeyKind) bool  { return s&(1<<k) != 0 }
func (s kindSet) intersects(o kindSet) bool { return s&o != 0 }

// watchIndex finds the waiting watches that a change of the model
// concerns: a watch on named resources by the model keys they were built
// from; a wildcard watch, whose set of names may grow with any new
// service, by the kinds of key its resources depend on.
//
// Not safe for concurrent use: its owner (Server.mu) serialises every
// call.
type watchIndex struct {
	byKey    map[model.ConfigKey]map[*watch]struct{}
	wildcard map[*watch]struct{}
}

func newWatchIndex() *watchIndex {
	return &watchIndex{byKey: map[model.ConfigKey]map[*watch]struct{}{}, wildcard: map[*watch]struct{}{}}
}

// add indexes a waiting watch under its current deps.
func (x *watchIndex) add(w *watch) {
	w.indexed = true
	if w.wildcard {
		x.wildcard[w] = struct{}{}
		return
	}
	for _, keys := range w.deps {
		for _, k := range keys {
			ws := x.byKey[k]
			if ws == nil {
				ws = map[*watch]struct{}{}
				x.byKey[k] = ws
			}
			ws[w] = struct{}{}
		}
	}
}

// remove takes a watch out of the index.
func (x *watchIndex) remove(w *watch) {
	if !w.indexed {
		return
	}
	w.indexed = false
	if w.wildcard {
		delete(x.wildcard, w)
		return
	}
	for _, keys := range w.deps {
		for _, k := range keys {
			if ws := x.byKey[k]; ws != nil {
				delete(ws, w)
				if len(ws) == 0 {
					delete(x.byKey, k)
				}
			}
		}
	}
}

// collect adds to out the watches that a change of key k concerns.
func (x *watchIndex) collect(k model.ConfigKey, out map[*watch]struct{}) {
	for w := range x.byKey[k] {
		out[w] = struct{}{}
	}
}

// collectWildcard adds to out the wildcard watches whose resources
// depend on a kind of key in changed. Every wildcard watch depends on
// KindService: its set of names is a function of the services.
func (x *watchIndex) collectWildcard(changed kindSet, out map[*watch]struct{}) {
	for w := range x.wildcard {
		if w.kinds.intersects(changed) {
			out[w] = struct{}{}
		}
	}
}

// all adds every indexed watch to out.
func (x *watchIndex) all(out map[*watch]struct{}) {
	for _, ws := range x.byKey {
		for w := range ws {
			out[w] = struct{}{}
		}
	}
	for w := range x.wildcard {
		out[w] = struct{}{}
	}
}

// depCollector gathers the model keys of the resources a watch covers:
// each resource's list as its entry holds it, and the kinds of their
// keys.
type depCollector struct {
	// kindsOnly: collect the kinds alone (wildcard watches, found by
	// kind).
	kindsOnly bool
	lists     [][]model.ConfigKey
	kinds     kindSet
}

func (d *depCollector) add(keys []model.ConfigKey) {
	for _, k := range keys {
		d.kinds.add(k.Kind)
	}
	if !d.kindsOnly && len(keys) > 0 {
		d.lists = append(d.lists, keys)
	}
}

// reserve makes room for the lists of n resources.
func (d *depCollector) reserve(n int) {
	if !d.kindsOnly && d.lists == nil && n > 0 {
		d.lists = make([][]model.ConfigKey, 0, n)
	}
}

// sameDeps: a and b list the same keys in the same lists, which is what
// a watch re-evaluated with nothing changed finds (its resources' entries
// are the cached ones, whose lists it shares).
func sameDeps(a, b [][]model.ConfigKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
