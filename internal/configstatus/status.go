// Package configstatus records what became of each Istio configuration
// object meshpilot read: applied, or refused and why, and which of its
// fields a kind of client does not get and why. Conversions produce a
// Status per object; the source that applies them records it in a
// Reporter, which /debug/configz, `meshpilot status config` and a metric
// read. A refused object leaves the last good state of that object in
// force: the Reporter only says so.
package configstatus

import (
	"cmp"
	"slices"
	"sync"
)

// Ref names an object.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Where, for an object read from a file, is "<file>:<line>
	// (document <n>)"; empty for an object of a cluster.
	Where string `json:"where,omitempty"`
}

func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Field is one field of an object and why it matters.
type Field struct {
	// Path is the field's path in the object, as the API server writes
	// it: "spec.http[0].route[1].weight".
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Status is what became of one object.
type Status struct {
	// Refused, when set, is why the object is not applied: the first
	// problem found, with the field it is about. The object's last
	// good version, if any, stays in force.
	Refused *Field `json:"refused,omitempty"`
	// IgnoredGRPC are the fields proxyless gRPC clients do not get (and
	// what they get instead, in Why).
	IgnoredGRPC []Field `json:"ignoredForGRPC,omitempty"`
	// IgnoredEnvoy are the fields Envoy clients do not get.
	IgnoredEnvoy []Field `json:"ignoredForEnvoy,omitempty"`
}

// Refuse returns a Status refusing the object for one field.
func Refuse(path, why string) Status { return Status{Refused: &Field{Path: path, Why: why}} }

// OK reports whether the object is applied in full for every client.
func (s Status) OK() bool {
	return s.Refused == nil && len(s.IgnoredGRPC) == 0 && len(s.IgnoredEnvoy) == 0
}

// Entry is an object and its status.
type Entry struct {
	Ref
	Status
}

// State names an entry's state: "refused", "partial" (applied, some
// fields ignored for a kind of client) or "applied".
func (e Entry) State() string {
	switch {
	case e.Refused != nil:
		return "refused"
	case len(e.IgnoredGRPC) > 0 || len(e.IgnoredEnvoy) > 0:
		return "partial"
	}
	return "applied"
}

// Reporter holds the status of every object. A nil *Reporter records
// nothing, so conversions may be run without one (tests, tools).
type Reporter struct {
	mu sync.Mutex // guards entries and onChange
	// entries by kind, namespace and name (Where is not part of the key:
	// an object has one status).
	entries  map[Ref]Status
	onChange []func()
}

// NewReporter returns an empty Reporter.
func NewReporter() *Reporter { return &Reporter{entries: map[Ref]Status{}} }

func key(r Ref) Ref { r.Where = ""; return r }

// Set records an object's status, replacing the one it had.
func (r *Reporter) Set(ref Ref, s Status) {
	if r == nil {
		return
	}
	r.mu.Lock()
	k := key(ref)
	for old := range r.entries {
		if key(old) == k {
			delete(r.entries, old)
		}
	}
	r.entries[ref] = s
	hooks := slices.Clone(r.onChange)
	r.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// Delete forgets an object (it is gone).
func (r *Reporter) Delete(ref Ref) {
	if r == nil {
		return
	}
	r.mu.Lock()
	k := key(ref)
	for old := range r.entries {
		if key(old) == k {
			delete(r.entries, old)
		}
	}
	hooks := slices.Clone(r.onChange)
	r.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// OnChange adds a function called after every Set or Delete (for
// metrics); it must not call back into the Reporter's writers.
func (r *Reporter) OnChange(f func()) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.onChange = append(r.onChange, f)
	r.mu.Unlock()
}

// List returns every entry, ordered by kind, namespace and name.
func (r *Reporter) List() []Entry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]Entry, 0, len(r.entries))
	for ref, s := range r.entries {
		out = append(out, Entry{Ref: ref, Status: s})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Get returns an object's status.
func (r *Reporter) Get(ref Ref) (Status, bool) {
	if r == nil {
		return Status{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(ref)
	for old, s := range r.entries {
		if key(old) == k {
			return s, true
		}
	}
	return Status{}, false
}
