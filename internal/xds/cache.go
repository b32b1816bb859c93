package xds

import (
	"strconv"

	"github.com/cespare/xxhash/v2"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
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
// bookkeeping (set), which the cache's owner's lock guards.
type entry struct {
	name    string
	version string
	any     *anypb.Any          // nil: the resource does not exist
	delta   *discovery.Resource // the delta form, shared too
	// deps are the model keys it was built from (Result.Deps).
	deps []model.ConfigKey
	// set and variant place a cached entry in the cache; set is nil for
	// an entry that is not cached (an absent resource).
	set     *entrySet
	variant variant
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
	e.delta = &discovery.Resource{Name: name, Version: e.version, Resource: e.any}
	return e, nil
}

// entrySet holds the variants of one resource name of one type: one entry
// per distinct value of the facts the generator said the resource varies
// by (Result.Vary). Most resources vary by nothing and have one.
type entrySet struct {
	typ  int
	name string
	vary Vary
	one  *entry             // the only variant, while there is one
	many map[variant]*entry // every variant, once there are more
}

func (s *entrySet) get(v variant) *entry {
	if s.many != nil {
		return s.many[v]
	}
	if s.one != nil && s.one.variant == v {
		return s.one
	}
	return nil
}

func (s *entrySet) put(e *entry) {
	switch {
	case s.many != nil:
		s.many[e.variant] = e
	case s.one == nil || s.one.variant == e.variant:
		s.one = e
	default:
		s.many = map[variant]*entry{s.one.variant: s.one, e.variant: e}
		s.one = nil
	}
}

func (s *entrySet) remove(e *entry) {
	if s.many != nil {
		delete(s.many, e.variant)
	} else if s.one == e {
		s.one = nil
	}
}

func (s *entrySet) empty() bool { return s.one == nil && len(s.many) == 0 }

func (s *entrySet) each(f func(*entry)) {
	if s.one != nil {
		f(s.one)
	}
	for _, e := range s.many {
		f(e)
	}
}

// resourceCache holds the generated resources of every type by name and
// client variant, and finds them by the model keys they were built from.
// Generation happens on a miss, so a resource costs nothing until a client
// asks for it, and a change drops exactly what was built from it.
//
// Not safe for concurrent use: its owner (Server.mu) serialises every
// call.
type resourceCache struct {
	gens []Generator
	// byName holds, per type (the generator's index), the resources by
	// name.
	byName []map[string]*entrySet
	// byDep finds the cached entries built from a model key.
	byDep map[model.ConfigKey]map[*entry]struct{}
	// marshals counts the resources marshalled (Stats.Marshals).
	marshals uint64
	// onError is told of a resource that cannot be marshalled.
	onError func(typ ResourceType, name string, err error)
}

func newResourceCache(gens []Generator, onError func(ResourceType, string, error)) *resourceCache {
	c := &resourceCache{gens: gens, byDep: map[model.ConfigKey]map[*entry]struct{}{}, onError: onError}
	c.byName = make([]map[string]*entrySet, len(gens))
	for i := range c.byName {
		c.byName[i] = map[string]*entrySet{}
	}
	return c
}

// get returns the entry of a resource for a client, generating and
// marshalling it on a miss. An absent resource is not cached (a name that
// designates nothing costs a generation, not memory), but its entry still
// carries the keys that would make it appear.
func (c *resourceCache) get(typ int, cl *Client, name string) *entry {
	set := c.byName[typ][name]
	if set != nil {
		if e := set.get(set.vary.of(cl)); e != nil {
			return e
		}
	}
	gen := c.gens[typ]
	r := gen.Generate(cl, name)
	if r.Resource != nil {
		c.marshals++
	}
	e, err := newEntry(gen.Type().URL, name, r.Resource, r.Deps)
	if err != nil {
		c.onError(gen.Type(), name, err)
		e = &entry{name: name, version: absent, deps: r.Deps}
	}
	if !e.exists() {
		return e
	}
	if set == nil || r.Vary&^set.vary != 0 {
		// New, or a client's result varies by a fact the name's variants
		// are not told apart by (one namespace's rule varies by client
		// kind, another's does not): the set is rebuilt to tell them
		// apart by every fact any result named, so that no variant
		// evicts another. It narrows again only when a change of a key
		// drops it.
		vary := r.Vary
		if set != nil {
			vary |= set.vary
			c.dropSet(set)
		}
		set = &entrySet{typ: typ, name: name, vary: vary}
		c.byName[typ][name] = set
	}
	e.set, e.variant = set, set.vary.of(cl)
	set.put(e)
	for _, k := range e.deps {
		m := c.byDep[k]
		if m == nil {
			m = map[*entry]struct{}{}
			c.byDep[k] = m
		}
		m[e] = struct{}{}
	}
	return e
}

// drop forgets every entry built from k; they are regenerated when next
// asked for.
func (c *resourceCache) drop(k model.ConfigKey) {
	for e := range c.byDep[k] {
		c.remove(e)
	}
}

// dropAll forgets everything.
func (c *resourceCache) dropAll() {
	for i := range c.byName {
		clear(c.byName[i])
	}
	clear(c.byDep)
}

func (c *resourceCache) dropSet(set *entrySet) {
	set.each(c.remove)
}

// remove takes a cached entry out of its set and out of the dependency
// index.
func (c *resourceCache) remove(e *entry) {
	set := e.set
	if set == nil {
		return
	}
	c.unindex(e)
	set.remove(e)
	if set.empty() && c.byName[set.typ][set.name] == set {
		delete(c.byName[set.typ], set.name)
	}
}

func (c *resourceCache) unindex(e *entry) {
	for _, k := range e.deps {
		if m := c.byDep[k]; m != nil {
			delete(m, e)
			if len(m) == 0 {
				delete(c.byDep, k)
			}
		}
	}
}

// len counts the cached entries.
func (c *resourceCache) len() int {
	n := 0
	for _, byName := range c.byName {
		for _, set := range byName {
			set.each(func(*entry) { n++ })
		}
	}
	return n
}
