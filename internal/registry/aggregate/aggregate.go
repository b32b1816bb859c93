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
// The aggregate holds no copy of the model: every read asks the sources,
// and with a single source it is that source.
package aggregate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Source is one registry of the aggregate.
type Source struct {
	// Name says which source an error or log line is about, e.g.
	// "kubernetes" or "files". Required, unique within an aggregate.
	Name string
	// Controller is the registry. Required. The aggregate adds its own
	// event handler to it in New and runs it in Run.
	Controller model.Controller
}

// Options configure a Controller.
type Options struct {
	// Sources are the registries, by precedence: for a hostname that
	// several define, the first one's definition is served. At least one.
	Sources []Source
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
type Controller struct {
	sources []Source
	// single is the only source when there is one: reads and events go
	// straight through.
	single model.Controller
	// lookups are the sources that know workloads, in order.
	lookups []model.WorkloadLookup

	mu       sync.RWMutex // guards handlers
	handlers []model.EventHandler

	runOnce sync.Once
}

// New builds the aggregate of opts.Sources and adds its event handler to
// each; Run runs them.
func New(opts Options) (*Controller, error) {
	if len(opts.Sources) == 0 {
		return nil, errors.New("aggregate: no source")
	}
	a := &Controller{}
	names := map[string]bool{}
	for _, s := range opts.Sources {
		switch {
		case s.Name == "":
			return nil, errors.New("aggregate: a source has no name")
		case names[s.Name]:
			return nil, fmt.Errorf("aggregate: two sources are named %q", s.Name)
		case s.Controller == nil:
			return nil, fmt.Errorf("aggregate: source %q has no registry", s.Name)
		}
		names[s.Name] = true
		if l, ok := s.Controller.(model.WorkloadLookup); ok {
			a.lookups = append(a.lookups, l)
		}
	}
	a.sources = opts.Sources
	if len(a.sources) == 1 {
		a.single = a.sources[0].Controller
	}
	for i, s := range a.sources {
		s.Controller.AppendEventHandler(func(ev model.Event) { a.fanIn(i, ev) })
	}
	return a, nil
}

// Sources returns the names of the sources, by precedence (first wins),
// for logs.
func (a *Controller) Sources() []string {
	out := make([]string, len(a.sources))
	for i, s := range a.sources {
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

// fanIn passes on an event of source i.
func (a *Controller) fanIn(i int, ev model.Event) {
	if a.single == nil {
		ev = a.translate(i, ev)
	}
	a.mu.RLock()
	handlers := a.handlers
	a.mu.RUnlock()
	for _, h := range handlers {
		h(ev)
	}
}

// HasSynced reports whether every source has built its first model.
func (a *Controller) HasSynced() bool {
	for _, s := range a.sources {
		if !s.Controller.HasSynced() {
			return false
		}
	}
	return true
}

// Run runs every source until ctx ends and returns once all have
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
	for _, s := range a.sources {
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
