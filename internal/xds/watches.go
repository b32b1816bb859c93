package xds

import (
	"slices"
	"unsafe"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
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
	// stream reads its node once, from its first request (xdsStream.admit).
	client *translate.Client
	stream *xdsStream
	ts     *typeState
	delta  bool
	// initial: the request acknowledged no response (an empty nonce),
	// so the client is answered even when it lacks nothing.
	initial bool
	// wildcard: the watch covers every resource of its type (translate.Generator.AllNames).
	wildcard bool

	// done: it was answered or cancelled and never will be again.
	done bool
}

// registration is a stream's standing entry in the watch index for one
// type: its watches come and go (one per request, ended by an answer),
// and each files itself under the same keys as the last, which would
// cost every key of every resource it covers twice per response (out
// at the answer, in again at the ACK: milliseconds for an Envoy holding
// ten thousand clusters' endpoints). So the type's filing outlives its
// watches: a watch takes the registration over, and only what its
// evaluation finds changed is refiled; a push that finds no open watch
// there wakes nobody. The registration goes when the stream ends
// (watcher.endType). Guarded by Server.mu.
type registration struct {
	// current is the open watch it stands for; nil between an answer
	// and the next request.
	current *watch
	// deps are the model keys of what the type's last evaluated watch
	// covers: each covered resource's list, shared with its cache entry
	// (entry.deps), rather than a copy of them all (a kilobyte for a
	// client of five services); a key may be in several. kinds is the
	// set of their kinds (for wildcard registrations, which are found by
	// kind, not by key).
	deps     [][]model.ConfigKey
	kinds    kindSet
	wildcard bool
	// indexed: the registration is in the watch index.
	indexed bool
}

// kindSet is a set of model.KeyKinds.
type kindSet uint32

func (s *kindSet) add(k model.KeyKind)      { *s |= 1 << k }
func (s kindSet) has(k model.KeyKind) bool  { return s&(1<<k) != 0 }
func (s kindSet) intersects(o kindSet) bool { return s&o != 0 }

// watchIndex finds the registrations (and so the waiting watches) that a
// change of the model concerns: one on named resources by the model keys
// they were built from; a wildcard one, whose set of names may grow with
// any new service, by the kinds of key its resources depend on.
//
// Registrations on named resources are filed by dependency list: a
// registration under the list of each resource it covers, a list under
// each of its keys. The resources' lists are their cache entries', the
// same for every client of a resource, so that a registration costs an
// element per resource rather than one per key of each (tens for a
// client of five services), and a key an element per list rather than
// one per client.
//
// Not safe for concurrent use: its owner (Server.mu) serialises every
// call.
type watchIndex struct {
	byKey    setIndex[model.ConfigKey, *depList]
	byList   map[depListID]*depList
	wildcard map[*registration]struct{}
}

// depList is one dependency list and the registrations filed under it.
type depList struct {
	id   depListID
	keys []model.ConfigKey
	regs smallSet[*registration]
}

// depListID tells dependency lists apart by identity: lists are shared,
// never changed, and comparing identities costs nothing per key.
type depListID struct {
	data *model.ConfigKey
	len  int
}

func listID(keys []model.ConfigKey) depListID {
	return depListID{unsafe.SliceData(keys), len(keys)}
}

func newWatchIndex() *watchIndex {
	return &watchIndex{
		byKey:    setIndex[model.ConfigKey, *depList]{},
		byList:   map[depListID]*depList{},
		wildcard: map[*registration]struct{}{},
	}
}

// add indexes a registration under its current deps.
func (x *watchIndex) add(w *registration) {
	w.indexed = true
	if w.wildcard {
		x.wildcard[w] = struct{}{}
		return
	}
	for _, keys := range w.deps {
		id := listID(keys)
		l := x.byList[id]
		if l == nil {
			l = &depList{id: id, keys: keys}
			x.byList[id] = l
			for _, k := range keys {
				x.byKey.add(k, l)
			}
		}
		l.regs.add(w)
	}
}

// remove takes a registration out of the index.
func (x *watchIndex) remove(w *registration) {
	if !w.indexed {
		return
	}
	w.indexed = false
	if w.wildcard {
		delete(x.wildcard, w)
		return
	}
	for _, keys := range w.deps {
		l := x.byList[listID(keys)]
		if l == nil {
			continue // a list the registration names twice, gone with the first
		}
		l.regs.remove(w)
		if l.regs.len() > 0 {
			continue
		}
		delete(x.byList, l.id)
		for _, k := range l.keys {
			x.byKey.remove(k, l)
		}
	}
}

// collect adds to out the registrations that a change of key k concerns.
func (x *watchIndex) collect(k model.ConfigKey, out map[*registration]struct{}) {
	ls := x.byKey[k]
	if ls == nil {
		return
	}
	ls.each(func(l *depList) {
		l.regs.each(func(w *registration) { out[w] = struct{}{} })
	})
}

// collectWildcard adds to out the wildcard registrations whose resources
// depend on a kind of key in changed. Every wildcard one depends on
// KindService: its set of names is a function of the services.
func (x *watchIndex) collectWildcard(changed kindSet, out map[*registration]struct{}) {
	for w := range x.wildcard {
		if w.kinds.intersects(changed) {
			out[w] = struct{}{}
		}
	}
}

// all adds every registration to out.
func (x *watchIndex) all(out map[*registration]struct{}) {
	for _, l := range x.byList {
		l.regs.each(func(w *registration) { out[w] = struct{}{} })
	}
	for w := range x.wildcard {
		out[w] = struct{}{}
	}
}

// empty says whether nothing is indexed.
func (x *watchIndex) empty() bool { return len(x.byList) == 0 && len(x.wildcard) == 0 }

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
