package xds

import "github.com/meshpilot/meshpilot/internal/model"

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
	// evaluation; kinds is the set of their kinds (for wildcard watches,
	// which are found by kind, not by key).
	deps  []model.ConfigKey
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
	for _, k := range w.deps {
		ws := x.byKey[k]
		if ws == nil {
			ws = map[*watch]struct{}{}
			x.byKey[k] = ws
		}
		ws[w] = struct{}{}
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
	for _, k := range w.deps {
		if ws := x.byKey[k]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(x.byKey, k)
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

// depCollector gathers the distinct model keys of the resources a watch
// covers, in first-seen order, without a map while there are few.
type depCollector struct {
	// kindsOnly: collect the kinds alone (wildcard watches, found by
	// kind).
	kindsOnly bool
	keys      []model.ConfigKey
	seen      map[model.ConfigKey]struct{}
	kinds     kindSet
}

const depCollectorLinear = 16

func (d *depCollector) add(keys []model.ConfigKey) {
	for _, k := range keys {
		d.kinds.add(k.Kind)
		if d.kindsOnly {
			continue
		}
		if d.seen != nil {
			if _, ok := d.seen[k]; ok {
				continue
			}
			d.seen[k] = struct{}{}
		} else if d.contains(k) {
			continue
		} else if len(d.keys) == depCollectorLinear {
			d.seen = make(map[model.ConfigKey]struct{}, 2*depCollectorLinear)
			for _, o := range d.keys {
				d.seen[o] = struct{}{}
			}
			d.seen[k] = struct{}{}
		}
		d.keys = append(d.keys, k)
	}
}

// reserve makes room for the keys of n resources, most of which depend
// on one key.
func (d *depCollector) reserve(n int) {
	if !d.kindsOnly && d.keys == nil && n > 0 {
		d.keys = make([]model.ConfigKey, 0, n)
	}
}

func (d *depCollector) contains(k model.ConfigKey) bool {
	for _, o := range d.keys {
		if o == k {
			return true
		}
	}
	return false
}
