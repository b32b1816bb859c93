// Package aggregate serves many registries (the Kubernetes registry, a
// folder of manifests, later Istio CRDs and remote clusters) as one
// model.Controller. It is what the server reads.
//
// Sources are ordered, and the order is the precedence: when several
// sources define a service of the same hostname, the definition (ports,
// resolution, addresses, labels) is the first source's, as in Istio's
// aggregate controller where the Kubernetes registry comes first. The
// endpoints of a service port are the union of every source's endpoints
// for the port of that name (a port number may name two ports, kube-dns's
// 53/UDP and 53/TCP, a name only one); a source that names the port
// differently adds nothing to it. An address and port listed by several
// sources counts once, the earlier source's copy winning, as the store
// merges duplicates of one source. A source may add endpoints to a
// service it does not define (its GetService is nil there: the
// WorkloadEntries a Kubernetes Service selects): they join the union
// while another source defines the hostname, and nothing is served
// otherwise.
//
// A handler of the aggregate gets every source's events, as changes of the
// served view: when a source deletes a service that another source still
// defines, the service is still served, so the event is ServiceChanged if
// the deleted definition was the served one (it moves to the next
// source), EndpointsChanged if it was shadowed (only the union of
// endpoints changed), and never ServiceDeleted. An event's NoEndpoints
// says that the aggregate, not the source, serves no endpoint for it. Its
// SameServiceAccounts is the source's: the identities of a union change
// only when those of a part do.
//
// Sources may be added, removed and replaced while the aggregate runs
// (remote clusters, as their credentials come and go): see AddSource.
//
// The aggregate holds no copy of the model: every read asks the sources,
// and with a single source it is that source.
package aggregate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Source is one registry of the aggregate.
type Source struct {
	// Name says which source an error or log line is about, e.g.
	// "kubernetes" or "files". Required, unique within an aggregate.
	Name string
	// Controller is the registry. Required. The aggregate adds its own
	// event handler to it in New and runs it in Run; for a source given
	// to AddSource or ReplaceSource, there and at once.
	Controller model.Controller
}

// Options configure a Controller.
type Options struct {
	// Sources are the registries, by precedence: for a hostname that
	// several define, the first one's definition is served. At least one.
	Sources []Source
	// SourceFailed, when set, is told that the Run of a source added with
	// AddSource failed (for a log line and a metric): the source stays,
	// serving its last model, until it is removed or replaced. Unlike a
	// failure of the sources of New, it does not stop the aggregate.
	SourceFailed func(name string, err error)
}

// Controller is the aggregate of its sources; it is a model.Controller
// and a model.WorkloadLookup.
//
// Its reads are safe for concurrent use at any time. Its event handlers
// are called on the sources' goroutines, so concurrently when two sources
// change at once, possibly for the same hostname: each event is emitted
// after the change behind it is visible through the aggregate, and says
// what changed in the aggregate's view as seen then. A change that races it in another source is followed by that source's own
// event, so a consumer that reads the model when it handles an event ends
// with the current model. Handlers must be safe for concurrent use and
// must not block for long: they hold up the source that called them.
// They must not add, remove or replace a source: a change of sources
// waits for the events in flight.
type Controller struct {
	// local are the sources of New: they alone decide HasSynced, and Run
	// runs them.
	local []Source
	// view is what reads and events look at: replaced whole, never
	// modified, when a source is added, removed or replaced, so that a
	// reader sees the sources before or after a change, never between.
	view atomic.Pointer[view]

	// viewMu orders events against changes of sources: an event is
	// translated and handled under the read lock, a change of sources
	// swaps the view and emits what it changed under the write lock, so
	// no event computed on the old view follows those of the change. It
	// also serialises the changes of sources.
	viewMu sync.RWMutex

	mu       sync.RWMutex // guards handlers
	handlers []model.EventHandler

	// conflicts, when set (ReportPortConflicts), reports port conflicts.
	conflicts atomic.Pointer[conflictReporter]

	// sourceFailed is Options.SourceFailed.
	sourceFailed func(name string, err error)

	runOnce sync.Once
}

// view is one arrangement of sources, by precedence. It is immutable.
type view struct {
	sources []*entry
	// single is the only source when there is one: reads and events go
	// straight through.
	single model.Controller
	// lookups are the sources that know workloads, in order.
	lookups []model.WorkloadLookup
}

// entry is one source of a view. Its pointer identifies the source in
// the events it emits: an index would change as sources come and go.
type entry struct {
	Source
	// added: the source came from AddSource or ReplaceSource, not New.
	// Then ctx is the context it was added with, for a replacement to run
	// under; runCtx, the one its Run gets, ends with cancel; done closes
	// once Run has returned. Set before the entry enters a view, never
	// changed after.
	added  bool
	ctx    context.Context
	runCtx context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newView(entries []*entry) *view {
	v := &view{sources: entries}
	if len(entries) == 1 {
		v.single = entries[0].Controller
	}
	for _, e := range entries {
		if l, ok := e.Controller.(model.WorkloadLookup); ok {
			v.lookups = append(v.lookups, l)
		}
	}
	return v
}

// index returns the position of e in v, or -1 when e has left it.
func (v *view) index(e *entry) int {
	for i, x := range v.sources {
		if x == e {
			return i
		}
	}
	return -1
}

// find returns the source of that name, or nil.
func (v *view) find(name string) *entry {
	for _, e := range v.sources {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// New builds the aggregate of opts.Sources and adds its event handler to
// each; Run runs them.
func New(opts Options) (*Controller, error) {
	if len(opts.Sources) == 0 {
		return nil, errors.New("aggregate: no source")
	}
	a := &Controller{sourceFailed: opts.SourceFailed}
	names := map[string]bool{}
	var entries []*entry
	for _, s := range opts.Sources {
		if err := checkSource(s); err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, fmt.Errorf("aggregate: two sources are named %q", s.Name)
		}
		names[s.Name] = true
		entries = append(entries, &entry{Source: s})
	}
	a.local = opts.Sources
	for _, e := range entries {
		e.Controller.AppendEventHandler(func(ev model.Event) { a.fanIn(e, ev) })
	}
	a.view.Store(newView(entries))
	return a, nil
}

func checkSource(s Source) error {
	switch {
	case s.Name == "":
		return errors.New("aggregate: a source has no name")
	case s.Controller == nil:
		return fmt.Errorf("aggregate: source %q has no registry", s.Name)
	}
	return nil
}

// Sources returns the names of the sources, by precedence (first wins),
// for logs.
func (a *Controller) Sources() []string {
	v := a.view.Load()
	out := make([]string, len(v.sources))
	for i, s := range v.sources {
		out[i] = s.Name
	}
	return out
}

// AppendEventHandler adds a handler that receives the events of every
// source, as changes of the aggregate's view; call it before Run.
func (a *Controller) AppendEventHandler(h model.EventHandler) {
	a.mu.Lock()
	a.handlers = append(a.handlers, h)
	a.mu.Unlock()
}

// fanIn passes on an event of source e. The events of a source that is
// not, or no longer, in the view are dropped: adding, removing or
// replacing it emits what it changed.
func (a *Controller) fanIn(e *entry, ev model.Event) {
	a.viewMu.RLock()
	defer a.viewMu.RUnlock()
	v := a.view.Load()
	if v.single == nil {
		i := v.index(e)
		if i < 0 {
			return
		}
		ev = v.translate(i, ev)
	} else if v.sources[0] != e {
		return
	}
	a.emit(ev)
}

// emit calls every handler with ev.
func (a *Controller) emit(ev model.Event) {
	a.mu.RLock()
	handlers := a.handlers
	a.mu.RUnlock()
	for _, h := range handlers {
		h(ev)
	}
}

// HasSynced reports whether every source of New has built its first
// model. Sources added later do not count: a remote cluster that cannot
// be reached must not hold up the local one (see AddSource).
func (a *Controller) HasSynced() bool {
	for _, s := range a.local {
		if !s.Controller.HasSynced() {
			return false
		}
	}
	return true
}

// Run runs every source of New until ctx ends and returns once all have
// stopped. The first source to fail stops the others, and its error,
// naming the source, is returned. A source whose Run returns nil early
// stops only itself (a Store, say): the others go on.
func (a *Controller) Run(ctx context.Context) error {
	started := false
	a.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("aggregate: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
		failure  error
	)
	for _, s := range a.local {
		wg.Go(func() {
			if err := s.Controller.Run(ctx); err != nil {
				failOnce.Do(func() {
					failure = fmt.Errorf("source %q: %w", s.Name, err)
					cancel()
				})
			}
		})
	}
	wg.Wait()
	return failure
}

var (
	_ model.Controller     = (*Controller)(nil)
	_ model.WorkloadLookup = (*Controller)(nil)
)
