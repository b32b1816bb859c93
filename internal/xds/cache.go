package xds

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/cespare/xxhash/v2"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
)

// absent is the version recorded in a client's returned resources for a
// name it asked for and that does not exist: it was answered (left out of
// a state-of-the-world response) and needs no answer again until it
// appears.
const absent = "-"

// entry is one generated resource, marshalled once and shared by every
// client that gets it. Its version is a hash of its bytes, so a
// regeneration that yields the same bytes yields the same version and
// nobody is sent anything. Immutable once built, except for the cache's
// bookkeeping (deps on reuse, slot), which the cache's owner's lock
// guards.
//
// Whoever holds a pointer to an entry holds the resource: the responses
// being sent and the client state of the streams it was sent to
// (clients.go). The cache itself holds entries weakly (slot), so that an
// entry nobody holds is garbage, bytes and all.
type entry struct {
	name    string
	version string
	any     *anypb.Any // nil: the resource does not exist
	// delta is the delta form, shared too; built on the first delta
	// response that carries the entry (deltaForm), since most clients
	// (every gRPC client) are state-of-the-world and never need it.
	delta *discovery.Resource
	// deps are the model keys it was built from (translate.Result.Deps).
	deps []model.ConfigKey
	// slot places a cached entry in the cache; nil for an entry that is
	// not cached (an absent resource).
	slot *slot
}

func (e *entry) exists() bool { return e != nil && e.any != nil }

var deterministic = proto.MarshalOptions{Deterministic: true}

// newEntry marshals a generated resource; m nil gives an absent entry.
func newEntry(typeURL, name string, m proto.Message, deps []model.ConfigKey) (*entry, error) {
	e := &entry{name: name, version: absent, deps: deps}
	if m == nil {
		return e, nil
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return nil, err
	}
	e.version = strconv.FormatUint(xxhash.Sum64(b), 36)
	e.any = &anypb.Any{TypeUrl: typeURL, Value: b}
	return e, nil
}

// deltaForm returns the entry as a delta response carries it, built once
// and kept while the entry lives. The cache's owner's lock is held: it
// guards delta as it does the entry's other bookkeeping; once built, the
// form is immutable and read by the sends outside the lock.
func (e *entry) deltaForm() *discovery.Resource {
	if e.delta == nil {
		e.delta = &discovery.Resource{Name: e.name, Version: e.version, Resource: e.any}
	}
	return e.delta
}

// slot is the cache's record of one cached entry: where it is filed and
// a weak pointer to it. The cache keeps an entry only while something
// else holds it (a client it was sent to, a response on its way): when
// the last holder lets go, the garbage collector frees the entry and
// the cache forgets its slot (collect, sweep). The next ask regenerates
// it, with the same bytes and so the same version if nothing changed:
// no client is sent anything again.
type slot struct {
	e       weak.Pointer[entry]
	set     *entrySet
	variant translate.Variant
	// deps are the keys it is filed under in byDep while indexed. A
	// slot that is not indexed is stale: a push changed one of its keys.
	// It stays in its set while its entry lives (clients still hold the
	// old version), so that a regeneration with the same bytes reuses
	// the entry those clients hold instead of keeping a second copy.
	deps    []model.ConfigKey
	indexed bool
}

// entrySet holds the variants of one resource name of one type: one slot
// per distinct value of the facts the generator said the resource varies
// by (translate.Result.Vary). Most resources vary by nothing and have one.
type entrySet struct {
	typ  int
	name string
	vary translate.Vary
	one  *slot                       // the only variant, while there is one
	many map[translate.Variant]*slot // every variant, once there are more
}

func (s *entrySet) get(v translate.Variant) *slot {
	if s.many != nil {
		return s.many[v]
	}
	if s.one != nil && s.one.variant == v {
		return s.one
	}
	return nil
}

func (s *entrySet) put(sl *slot) {
	switch {
	case s.many != nil:
		s.many[sl.variant] = sl
	case s.one == nil || s.one.variant == sl.variant:
		s.one = sl
	default:
		s.many = map[translate.Variant]*slot{s.one.variant: s.one, sl.variant: sl}
		s.one = nil
	}
}

// remove takes sl out of the set, unless another slot took its place.
func (s *entrySet) remove(sl *slot) {
	if s.many != nil {
		if s.many[sl.variant] == sl {
			delete(s.many, sl.variant)
		}
	} else if s.one == sl {
		s.one = nil
	}
}

func (s *entrySet) empty() bool { return s.one == nil && len(s.many) == 0 }

func (s *entrySet) each(f func(*slot)) {
	if s.one != nil {
		f(s.one)
	}
	for _, sl := range s.many {
		f(sl)
	}
}

// resourceCache holds the generated resources of every type by name and
// client variant, and finds them by the model keys they were built from.
// Generation happens on a miss, so a resource costs nothing until a client
// asks for it; a change drops exactly what was built from it; and a
// resource no client holds any more is dropped too (slot).
//
// Not safe for concurrent use: its owner (Server.mu) serialises every
// call. Only collect, which the garbage collector's cleanups call, runs
// outside it.
type resourceCache struct {
	gens []translate.Generator
	// byName holds, per type (the generator's index), the resources by
	// name.
	byName []map[string]*entrySet
	// byDep finds the slots of the cached entries built from a model key.
	// Most keys index a few (a service's own resources, one per type and
	// variant), a few thousands (the mesh settings every route reads).
	byDep setIndex[model.ConfigKey, *slot]
	// marshals counts the resources marshalled (Stats.Marshals).
	marshals uint64
	// prepared, while an evaluation runs, are the resources generated
	// for it outside the owner's lock (Server.watch); nil otherwise.
	prepared *prepared
	// onError is told of a resource that cannot be marshalled.
	onError func(typ translate.ResourceType, name string, err error)

	// collectedMu guards collected: the slots of entries the garbage
	// collector freed, which the next call under the owner's lock
	// forgets (sweep). A cleanup does not take the owner's lock itself:
	// a push holds it for long, and cleanups of the whole process wait
	// for one another.
	collectedMu sync.Mutex
	collected   []*slot
	swept       atomic.Bool // true when collected is empty
	// collectFn is collect, made once: a method value allocates.
	collectFn func(*slot)
}

func newResourceCache(gens []translate.Generator, onError func(translate.ResourceType, string, error)) *resourceCache {
	c := &resourceCache{gens: gens, byDep: setIndex[model.ConfigKey, *slot]{}, onError: onError}
	c.byName = make([]map[string]*entrySet, len(gens))
	for i := range c.byName {
		c.byName[i] = map[string]*entrySet{}
	}
	c.swept.Store(true)
	c.collectFn = c.collect
	return c
}

// get returns the entry of a resource for a client, generating and
// marshalling it on a miss. An absent resource is not cached (a name that
// designates nothing costs a generation, not memory), but its entry still
// carries the keys that would make it appear.
func (c *resourceCache) get(typ int, cl *translate.Client, name string) *entry {
	c.sweep()
	set := c.byName[typ][name]
	var stale *entry
	if set != nil {
		if sl := set.get(set.vary.Of(cl)); sl != nil {
			if e := sl.e.Value(); e != nil {
				if sl.indexed {
					return e
				}
				stale = e
			}
		}
	}
	var r translate.Result
	var e *entry
	if p, ok := c.prepared.take(typ, cl, name); ok {
		r, e = p.result, p.entry
	} else {
		r, e = c.generate(typ, cl, name)
	}
	if r.Resource != nil {
		c.marshals++
	}
	if !e.exists() {
		return e
	}
	if stale != nil && stale.version == e.version && r.Vary&^set.vary == 0 {
		// The clients that hold the old entry and those that ask now
		// share one copy of the same bytes.
		stale.deps = e.deps
		c.index(stale.slot, stale.deps)
		return stale
	}
	if set == nil || r.Vary&^set.vary != 0 {
		// New, or a client's result varies by a fact the name's variants
		// are not told apart by (one namespace's rule varies by client
		// kind, another's does not): the set is rebuilt to tell them
		// apart by every fact any result named, so that no variant
		// evicts another. It narrows again only when its entries go.
		vary := r.Vary
		if set != nil {
			vary |= set.vary
			c.dropSet(set)
		}
		set = &entrySet{typ: typ, name: name, vary: vary}
		c.byName[typ][name] = set
	}
	sl := &slot{e: weak.Make(e), set: set, variant: set.vary.Of(cl)}
	e.slot = sl
	if old := set.get(sl.variant); old != nil {
		c.unindex(old) // a stale variant, or one whose entry is gone
	}
	set.put(sl)
	c.index(sl, e.deps)
	runtime.AddCleanup(e, c.collectFn, sl)
	return e
}

// peek returns the current cached entry of a resource for a client, or
// nil when there is none (a miss, or an entry made stale by a change):
// it generates nothing, so that a caller holding the owner's lock only
// for it does not hold it while building.
func (c *resourceCache) peek(typ int, cl *translate.Client, name string) *entry {
	set := c.byName[typ][name]
	if set == nil {
		return nil
	}
	sl := set.get(set.vary.Of(cl))
	if sl == nil || !sl.indexed {
		return nil
	}
	return sl.e.Value()
}

// build generates and marshals a resource for a client and keeps
// nothing of it: it touches none of the cache's state, so it runs
// without the owner's lock (generators are safe for concurrent use).
// A REST answer is built so: nothing holds it once sent, so caching it
// would only make a flood of requests hold the lock pushes need.
func (c *resourceCache) build(typ int, cl *translate.Client, name string) *entry {
	_, e := c.generate(typ, cl, name)
	return e
}

// generate generates and marshals a resource for a client. It touches
// none of the cache's state, so it runs with or without the owner's lock
// (generators are safe for concurrent use).
func (c *resourceCache) generate(typ int, cl *translate.Client, name string) (translate.Result, *entry) {
	gen := c.gens[typ]
	r := gen.Generate(cl, name)
	e, err := newEntry(gen.Type().URL, name, r.Resource, r.Deps)
	if err != nil {
		c.onError(gen.Type(), name, err)
		e = &entry{name: name, version: absent, deps: r.Deps}
	}
	return r, e
}

// prepared are resources of one type generated for one client without
// the owner's lock, for the evaluation that follows (Server.watch): get
// takes them instead of generating under the lock. A change between
// their generation and that evaluation discards them (Server.pushes).
type prepared struct {
	typ    int
	client *translate.Client
	byName map[string]preparedEntry
}

type preparedEntry struct {
	result translate.Result
	entry  *entry
}

// take returns the prepared resource of that name for cl, if any.
func (p *prepared) take(typ int, cl *translate.Client, name string) (preparedEntry, bool) {
	if p == nil || p.typ != typ || p.client != cl {
		return preparedEntry{}, false
	}
	e, ok := p.byName[name]
	return e, ok
}

func (c *resourceCache) index(sl *slot, deps []model.ConfigKey) {
	sl.deps, sl.indexed = deps, true
	for _, k := range deps {
		c.byDep.add(k, sl)
	}
}

// drop makes every entry built from k stale: it is regenerated when
// next asked for.
func (c *resourceCache) drop(k model.ConfigKey) {
	s := c.byDep[k]
	if s == nil {
		return
	}
	// Out of the index first, so that unindex leaves s as it is while
	// it is walked.
	delete(c.byDep, k)
	s.each(c.unindex)
}

// dropAll makes everything stale.
func (c *resourceCache) dropAll() {
	for _, byName := range c.byName {
		for _, set := range byName {
			set.each(func(sl *slot) { sl.deps, sl.indexed = nil, false })
		}
	}
	clear(c.byDep)
}

// dropSet forgets a set that is being replaced.
func (c *resourceCache) dropSet(set *entrySet) {
	set.each(c.unindex)
	if c.byName[set.typ][set.name] == set {
		delete(c.byName[set.typ], set.name)
	}
}

// unindex takes a slot out of the dependency index.
func (c *resourceCache) unindex(sl *slot) {
	if !sl.indexed {
		return
	}
	for _, k := range sl.deps {
		c.byDep.remove(k, sl)
	}
	sl.deps, sl.indexed = nil, false
}

// collect is the cleanup of a cached entry: the garbage collector freed
// it, nobody held it any more. Called on the runtime's cleanup goroutine.
func (c *resourceCache) collect(sl *slot) {
	c.collectedMu.Lock()
	c.collected = append(c.collected, sl)
	c.swept.Store(false)
	c.collectedMu.Unlock()
}

// sweep forgets the slots of the entries the garbage collector freed.
func (c *resourceCache) sweep() {
	if c.swept.Load() {
		return
	}
	c.collectedMu.Lock()
	collected := c.collected
	c.collected = nil
	c.swept.Store(true)
	c.collectedMu.Unlock()
	for _, sl := range collected {
		c.unindex(sl)
		set := sl.set
		set.remove(sl)
		if set.empty() && c.byName[set.typ][set.name] == set {
			delete(c.byName[set.typ], set.name)
		}
	}
}

// len counts the cached entries that are current (no push changed their
// keys since they were built) and held.
func (c *resourceCache) len() int {
	c.sweep()
	n := 0
	for _, byName := range c.byName {
		for _, set := range byName {
			set.each(func(sl *slot) {
				if sl.indexed && sl.e.Value() != nil {
					n++
				}
			})
		}
	}
	return n
}

// held counts the entries of a resource name of a type that the cache
// still has (current or stale), for tests.
func (c *resourceCache) held(typ int, name string) int {
	c.sweep()
	n := 0
	if set := c.byName[typ][name]; set != nil {
		set.each(func(sl *slot) {
			if sl.e.Value() != nil {
				n++
			}
		})
	}
	return n
}
