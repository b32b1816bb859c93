package crd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
	"github.com/meshpilot/meshpilot/internal/registry/relist"
)

// Options configure a Registry.
type Options struct {
	// Namespaces, when set, limits every list and watch to these
	// namespaces, as kube.Options.Namespaces does for Kubernetes objects.
	Namespaces []string
	// Logger; default slog.Default().
	Logger *slog.Logger
	// QueueMetrics, when set, receives the work queue's metrics under the
	// queue name QueueName.
	QueueMetrics workqueue.MetricsProvider
}

// QueueName names the registry's work queue in its metrics.
const QueueName = "meshpilot_istio_config"

// Event says that the object it names may have changed: its handler reads
// the object's current state through the Registry (nil: deleted).
type Event struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (e Event) String() string { return string(e.Kind) + " " + e.Namespace + "/" + e.Name }

// EventHandler receives change events, on the registry's worker goroutine.
type EventHandler func(Event)

// Registry watches the Istio kinds of one cluster: the traffic kinds and
// the security kinds. Its read
// methods and HasSynced are safe for concurrent use at any time;
// AppendEventHandler is called before Run, and Run once.
type Registry struct {
	opts     Options
	log      *slog.Logger
	handlers []EventHandler

	// crds watch the kinds' CRDs, in the order of kinds.
	crds    []cache.SharedIndexInformer
	crdRegs []cache.ResourceEventHandlerRegistration
	// namespaces are the watched namespaces ("" meaning all): each kind
	// has one informer per namespace, in this order.
	namespaces []string
	// clients list and watch the kinds, one per API group version
	// (clientKey).
	clients map[string]*kubeapi.Group
	// relisters let Relist interrupt each kind's watches.
	relisters map[Kind]*relist.Relister
	queue     workqueue.TypedRateLimitingInterface[Event]
	crdSynced atomic.Bool

	// running runs the kinds' informers.
	running kubeapi.Informers

	mu sync.Mutex // guards watched and stop
	// watched holds the kinds whose informers were started; a kind is
	// never removed.
	watched map[Kind]*watchedKind
	// stop is Run's ctx.Done(); nil before Run, so that a CRD seen early
	// starts nothing until Run.
	stop <-chan struct{}

	runOnce sync.Once
}

// watchedKind is a kind whose informers run.
type watchedKind struct {
	informers     []cache.SharedIndexInformer // one per namespace
	registrations []cache.ResourceEventHandlerRegistration
}

// NewForConfig builds a Registry with clients of networking.istio.io,
// security.istio.io and apiextensions.k8s.io (only the kinds read) of an
// API server's configuration; Run starts it.
func NewForConfig(cfg *rest.Config, opts Options) (*Registry, error) {
	clients := map[string]*kubeapi.Group{}
	for _, g := range groups {
		c, err := kubeapi.NewGroup(cfg, g)
		if err != nil {
			return nil, fmt.Errorf("building a client of %s: %w", g.GroupVersion, err)
		}
		clients[clientKey(g.GroupVersion.Group, g.GroupVersion.Version)] = c
	}
	ext, err := kubeapi.NewGroup(cfg, crdGroupOptions)
	if err != nil {
		return nil, fmt.Errorf("building an apiextensions client: %w", err)
	}
	return newRegistry(clients, ext, opts)
}

func newRegistry(clients map[string]*kubeapi.Group, apiextensions *kubeapi.Group, opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{
		opts: opts,
		log:  opts.Logger.With("registry", "istio"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[Event](),
			workqueue.TypedRateLimitingQueueConfig[Event]{Name: QueueName, MetricsProvider: opts.QueueMetrics}),
		running:   kubeapi.Informers{Transform: kubeconv.StripManagedFields},
		watched:   map[Kind]*watchedKind{},
		clients:   clients,
		relisters: map[Kind]*relist.Relister{},
	}
	for _, k := range kinds {
		r.relisters[k.kind] = relist.New()
	}
	namespaces := slices.Compact(slices.Sorted(slices.Values(opts.Namespaces)))
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	r.namespaces = namespaces
	for _, k := range kinds {
		inf, err := newCRDInformer(apiextensions, k.crd)
		if err != nil {
			return nil, err
		}
		start := func(obj any) {
			if crdServes(obj, k.version) {
				r.startKind(k)
			}
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    start,
			UpdateFunc: func(_, obj any) { start(obj) },
		})
		if err != nil {
			return nil, err
		}
		r.crds = append(r.crds, inf)
		r.crdRegs = append(r.crdRegs, reg)
	}
	return r, nil
}

// AppendEventHandler adds a handler for change events; call it before Run.
func (r *Registry) AppendEventHandler(h EventHandler) { r.handlers = append(r.handlers, h) }

// Run watches the CRDs, starts the informers of the kinds that are
// installed now or later, and delivers change events until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	started := false
	r.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("istio registry: Run called twice")
	}
	defer r.queue.ShutDown()
	r.mu.Lock()
	r.stop = ctx.Done()
	r.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, inf := range r.crds {
		wg.Go(func() { inf.Run(ctx.Done()) })
	}
	defer r.running.Shutdown()

	start := time.Now()
	synced := make([]cache.DoneChecker, len(r.crdRegs))
	for i, reg := range r.crdRegs {
		synced[i] = reg.HasSyncedChecker()
	}
	if !cache.WaitFor(ctx, "", synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("istio registry: the CustomResourceDefinition watches did not sync")
	}
	r.crdSynced.Store(true)
	if missing := r.missingCRDs(); len(missing) > 0 {
		r.log.Info("Istio configuration is not available: its CustomResourceDefinitions are not installed; each kind will be watched as soon as its CRD is",
			"missing", strings.Join(missing, ","))
	} else {
		r.log.Info("watching Istio configuration", "kinds", len(kinds), "took", time.Since(start).Round(time.Millisecond))
	}

	wg.Go(func() {
		for r.processNext() {
		}
	})
	<-ctx.Done()
	r.queue.ShutDown()
	return nil
}

// missingCRDs names the CRDs whose kinds are not watched yet.
func (r *Registry) missingCRDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	for _, k := range kinds {
		if r.watched[k.kind] == nil {
			missing = append(missing, k.crd)
		}
	}
	return missing
}

// startKind starts the informers of a kind whose CRD now serves it; it is
// called from the CRD informers' handlers, again on every CRD update, and
// does nothing the second time.
func (r *Registry) startKind(k kindInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil || r.watched[k.kind] != nil {
		return
	}
	w := &watchedKind{}
	for _, ns := range r.namespaces {
		inf, err := r.running.Add(k.informer(r.clients[clientKey(k.group, k.version)], r.relisters[k.kind], ns))
		if err != nil {
			r.log.Warn("cannot watch Istio objects", "kind", k.kind, "error", err)
			return
		}
		reg, err := inf.AddEventHandler(r.handler(k.kind))
		if err != nil {
			// Only a stopped informer refuses a handler: Run is ending.
			r.log.Warn("cannot watch Istio objects", "kind", k.kind, "error", err)
			return
		}
		w.informers = append(w.informers, inf)
		w.registrations = append(w.registrations, reg)
	}
	// Start runs only the informers not yet running: the new kind's.
	r.running.Start(r.stop)
	r.watched[k.kind] = w
	if r.crdSynced.Load() {
		r.log.Info("Istio configuration available: watching", "kind", k.kind)
	}
}

// HasSynced reports whether the CRD watches have synced and every kind
// whose CRD is installed has its informers synced and handled. Without the
// CRDs there is nothing to wait for.
func (r *Registry) HasSynced() bool {
	if !r.crdSynced.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.watched {
		for _, reg := range w.registrations {
			if !reg.HasSynced() {
				return false
			}
		}
	}
	return true
}

// Watching reports whether a kind's informers run, that is whether its
// CRD has been seen serving.
func (r *Registry) Watching(k Kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watched[k] != nil
}

func (r *Registry) processNext() bool {
	ev, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(ev)
	for _, h := range r.handlers {
		h(ev)
	}
	r.queue.Forget(ev)
	return true
}

// informers returns the informers of a kind, nil while it is not watched.
func (r *Registry) informers(k Kind) []cache.SharedIndexInformer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.watched[k]; w != nil {
		return w.informers
	}
	return nil
}
