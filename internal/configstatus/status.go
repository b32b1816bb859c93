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
	"log/slog"
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
	// Merged says which other object the object is merged with, as Istio
	// merges several objects for one host (what of it is dropped by the
	// merge is in IgnoredGRPC and IgnoredEnvoy). A merge alone leaves
	// the object applied.
	Merged []Field `json:"merged,omitempty"`
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

// The states of an entry.
const (
	StateApplied = "applied"
	// StatePartial: applied, some fields ignored for a kind of client.
	StatePartial = "partial"
	StateRefused = "refused"
)

// States lists the states, best first.
var States = []string{StateApplied, StatePartial, StateRefused}

// State names an entry's state: StateRefused, StatePartial or
// StateApplied.
func (e Entry) State() string {
	switch {
	case e.Refused != nil:
		return StateRefused
	case len(e.IgnoredGRPC) > 0 || len(e.IgnoredEnvoy) > 0:
		return StatePartial
	}
	return StateApplied
}

// Equal reports whether two statuses say the same.
func (s Status) Equal(o Status) bool {
	return equalField(s.Refused, o.Refused) && slices.Equal(s.IgnoredGRPC, o.IgnoredGRPC) && slices.Equal(s.IgnoredEnvoy, o.IgnoredEnvoy) &&
		slices.Equal(s.Merged, o.Merged)
}

func equalField(a, b *Field) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Reporter holds the status of every object. A nil *Reporter records
// nothing, so conversions may be run without one (tests, tools).
//
// A Reporter with a logger (SetLogger) logs one line when an object is
// refused, naming the object, the field and why, and one when a refused
// object is applied again. A status set again unchanged (an informer's
// relist) logs nothing and calls no OnChange function.
type Reporter struct {
	mu sync.Mutex // guards entries, onChange and log
	// entries by kind, namespace and name (key: Where is not part of it,
	// an object has one status), each with its full Ref. A map lookup,
	// so that setting one status costs the same among 10 000 objects.
	entries  map[Ref]Entry
	onChange []func()
	log      *slog.Logger
}

// NewReporter returns an empty Reporter.
func NewReporter() *Reporter { return &Reporter{entries: map[Ref]Entry{}} }

func key(r Ref) Ref { r.Where = ""; return r }

// SetLogger makes the Reporter log refusals to log; call it before the
// first Set.
func (r *Reporter) SetLogger(log *slog.Logger) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.log = log
	r.mu.Unlock()
}

// Set records an object's status, replacing the one it had.
func (r *Reporter) Set(ref Ref, s Status) {
	if r == nil {
		return
	}
	r.mu.Lock()
	k := key(ref)
	before, had := r.entries[k]
	r.entries[k] = Entry{Ref: ref, Status: s}
	if had && before.Ref == ref && before.Status.Equal(s) {
		r.mu.Unlock()
		return
	}
	hooks := slices.Clone(r.onChange)
	log := r.log
	r.mu.Unlock()
	if log != nil {
		logChange(log, ref, before.Status, s)
	}
	for _, f := range hooks {
		f()
	}
}

// logChange logs a refusal, or the end of one.
func logChange(log *slog.Logger, ref Ref, before, now Status) {
	attrs := []any{"kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name}
	if ref.Where != "" {
		attrs = append(attrs, "where", ref.Where)
	}
	switch {
	case now.Refused != nil && !equalField(before.Refused, now.Refused):
		log.Warn("configuration refused; its last good version stays in force",
			append(attrs, "field", now.Refused.Path, "reason", now.Refused.Why)...)
	case now.Refused == nil && before.Refused != nil:
		log.Info("configuration applied after a refusal", attrs...)
	}
}

// Delete forgets an object (it is gone).
func (r *Reporter) Delete(ref Ref) {
	if r == nil {
		return
	}
	r.mu.Lock()
	k := key(ref)
	if _, found := r.entries[k]; !found {
		r.mu.Unlock()
		return
	}
	delete(r.entries, k)
	hooks := slices.Clone(r.onChange)
	r.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// OnChange adds a function called after every Set or Delete that changes
// a status (for metrics), possibly from several goroutines at once; it
// must not call back into the Reporter's writers.
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
	for _, e := range r.entries {
		out = append(out, e)
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
	e, ok := r.entries[key(ref)]
	return e.Status, ok
}

// RefuseAt records why the object is refused, unless a problem was
// recorded before: the first one found is the one reported.
func (s *Status) RefuseAt(path, why string) {
	if s.Refused == nil {
		s.Refused = &Field{Path: path, Why: why}
	}
}

// IgnoreGRPC records a field gRPC clients do not get, and why.
func (s *Status) IgnoreGRPC(path, why string) {
	s.IgnoredGRPC = append(s.IgnoredGRPC, Field{Path: path, Why: why})
}

// IgnoreEnvoy records a field Envoy clients do not get, and why.
func (s *Status) IgnoreEnvoy(path, why string) {
	s.IgnoredEnvoy = append(s.IgnoredEnvoy, Field{Path: path, Why: why})
}
