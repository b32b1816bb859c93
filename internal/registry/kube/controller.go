// Package kube is meshpilot's Kubernetes registry: it watches Services,
// EndpointSlices, Pods, Nodes and Namespaces through shared informers and
// keeps a model.Store current.
//
// Informer handlers only turn events into service keys on a rate-limited
// work queue; workers rebuild one service at a time from the listers. The
// store compares each rebuild with what it holds, so only real changes
// reach the event handlers.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
	"github.com/meshpilot/meshpilot/internal/registry/relist"
)

// Options configure a Controller.
type Options struct {
	// ClusterID names the cluster this registry watches; it is written on
	// every endpoint (model.Endpoint ClusterID). Empty means the local
	// cluster: remote clusters' registries set it.
	ClusterID string
	// LocalClusterID is the local cluster's ID (--cluster-id), which the
	// label topology.istio.io/cluster gives the endpoints of a registry
	// without ClusterID, as Istio labels them; model.DefaultClusterID
	// when empty.
	LocalClusterID string
	// DomainSuffix ends every hostname; default "cluster.local".
	DomainSuffix string
	// Namespaces, when set, limits every list and watch to these
	// namespaces: the API server sends nothing else.
	Namespaces []string
	// DiscoverySelectors, when set, keeps only the services of namespaces
	// whose labels match at least one selector (label selector syntax,
	// e.g. "env=prod,team in (a,b)"). The choice follows label changes.
	// SetMeshDiscoverySelectors adds MeshConfig's to them at run time.
	DiscoverySelectors []string
	// MeshSynced, when set, holds the first model back until it is
	// done: the mesh config's discovery selectors are then in force from
	// the first model on, rather than removing services right after it.
	MeshSynced cache.DoneChecker
	// Workers is the number of goroutines rebuilding services; default 2.
	Workers int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// QueueMetrics, when set, receives the work queue's metrics (depth,
	// adds, latency, work duration, retries) under the queue name
	// "meshpilot_services". It is per queue, so several controllers in one
	// process (tests) keep theirs apart.
	QueueMetrics workqueue.MetricsProvider
	// OnInformerEvent, when set, is called for every informer event with
	// the kind of object ("Service", "EndpointSlice", "Pod", "Node",
	// "Namespace") and the event ("add", "update", "delete"), including
	// updates that change nothing. It runs on the informers' goroutines
	// and must be fast.
	OnInformerEvent func(kind, event string)
}

// QueueName names the controller's work queue in its metrics.
const QueueName = "meshpilot_services"

// serviceKey names a Kubernetes Service; it is the work queue's item.
type serviceKey struct{ namespace, name string }

func (k serviceKey) String() string { return k.namespace + "/" + k.name }

// Index names.
const (
	// slices by "<namespace>/<service name>".
	indexSliceByService = "service"
	// slices by the nodes of their endpoints, to find what a Node change
	// affects. Addresses are looked up in ipKeys instead.
	indexSliceByNode = "node"
	// pods by node name.
	indexPodByNode = "node"
)

// namespacedInformers are the informers of one watch scope: one namespace,
// or all namespaces ("").
type namespacedInformers struct {
	services cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	pods     cache.SharedIndexInformer
	// podIPs and sliceIPs find pods and slices by address; the event
	// handlers keep them.
	podIPs, sliceIPs *ipKeys
}

// Controller is the Kubernetes registry. Its model methods
// (model.ServiceDiscovery) are safe for concurrent use at any time; Run
// is called once.
type Controller struct {
	// store holds the model; only this registry writes it. Others read it
	// through the embedded view.
	store *model.Store
	model.StoreView

	opts      Options
	client    *kubeapi.Client
	log       *slog.Logger
	selection namespaceSelection

	informers *kubeapi.Informers
	scopes    map[string]*namespacedInformers // by namespace; "" means all
	nodes     cache.SharedIndexInformer
	// namespaces always runs: MeshConfig may bring selectors at any time,
	// and namespaces are few and stripped of managed fields.
	namespaces cache.SharedIndexInformer

	// watchNamespaces are the namespaces of the namespaced informers
	// ("" for all), sorted.
	watchNamespaces []string
	// live are the informers' caches, which reconcile reads.
	live *indexes
	// relisters let Relist interrupt each kind's watches.
	relisters map[string]*relist.Relister

	registrations []cache.ResourceEventHandlerRegistration
	queue         workqueue.TypedRateLimitingInterface[serviceKey]
	// rebuilds counts the services rebuilt, for tests.
	rebuilds atomic.Int64
	// listing is true until every informer has delivered its initial
	// list: until then handlers queue nothing, since the first model is
	// built from the caches once they hold those lists (Run), and a
	// hundred thousand Pods would each look up the slices of its
	// addresses for nothing.
	listing atomic.Bool
	synced  atomic.Bool

	// observed holds, per queued key, when the earliest informer event
	// not yet reconciled reached a handler; reconcile takes it and the
	// store's event carries it, so that convergence is measured from the
	// moment Kubernetes told us.
	observedMu sync.Mutex // guards observed
	observed   map[serviceKey]time.Time
	runOnce    sync.Once

	// workloadHandlers are told of Pod changes (workloads.go); appended
	// before Run.
	workloadHandlers []func(namespace string)
}

// New builds a Controller; Run starts it.
func New(client *kubeapi.Client, opts Options) (*Controller, error) {
	opts.DomainSuffix = model.DomainSuffixOrDefault(opts.DomainSuffix)
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	store := model.NewStore()
	c := &Controller{
		store:     store,
		StoreView: store.View(),
		opts:      opts,
		client:    client,
		log:       opts.Logger.With("registry", "kubernetes"),
		scopes:    map[string]*namespacedInformers{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[serviceKey](),
			workqueue.TypedRateLimitingQueueConfig[serviceKey]{Name: QueueName, MetricsProvider: opts.QueueMetrics}),
		observed:  map[serviceKey]time.Time{},
		relisters: map[string]*relist.Relister{},
	}
	c.listing.Store(true)
	for _, k := range Kinds {
		c.relisters[k] = relist.New()
	}
	for _, s := range opts.DiscoverySelectors {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("discovery selector %q: %w", s, err)
		}
		c.selection.flag = append(c.selection.flag, sel)
	}

	c.informers = &kubeapi.Informers{Transform: stripObject}
	var err error
	namespaces := slices.Compact(slices.Sorted(slices.Values(opts.Namespaces)))
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	c.watchNamespaces = namespaces
	for _, ns := range namespaces {
		scope := &namespacedInformers{podIPs: newIPKeys(podIPs), sliceIPs: newIPKeys(sliceIPs)}
		for _, k := range []struct {
			inf  *cache.SharedIndexInformer
			kind string
		}{{&scope.services, KindService}, {&scope.slices, KindEndpointSlice}, {&scope.pods, KindPod}} {
			if *k.inf, err = c.informer(k.kind, ns); err != nil {
				return nil, err
			}
		}
		c.scopes[ns] = scope
	}
	if c.nodes, err = c.informer(KindNode, metav1.NamespaceAll); err != nil {
		return nil, err
	}
	if c.namespaces, err = c.informer(KindNamespace, metav1.NamespaceAll); err != nil {
		return nil, err
	}
	c.live = c.liveIndexes()
	if err := c.addHandlers(); err != nil {
		return nil, err
	}
	return c, nil
}

// stripObject keeps in the informer caches only what conversion reads.
func stripObject(obj any) (any, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return StripPod(obj)
	case *kubeconv.PodInfo:
		return obj, nil // already stripped
	case *corev1.Node:
		return StripNode(obj)
	case *corev1.Service:
		return StripService(obj)
	case *discoveryv1.EndpointSlice:
		return StripEndpointSlice(obj)
	}
	return StripManagedFields(obj)
}

// Run starts the informers, builds the first model, then keeps it current
// until ctx ends. It returns an error only when the caches cannot sync.
func (c *Controller) Run(ctx context.Context) error {
	started := false
	c.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("kube registry: Run called twice")
	}
	defer c.queue.ShutDown()
	c.informers.Start(ctx.Done())
	defer c.informers.Shutdown()

	start := time.Now()
	// Waited for, not polled: a poll (client-go's WaitForCacheSync, every
	// 100 ms) adds up to a period to the time to ready, after lists that
	// take tens of milliseconds in a small cluster.
	synced := make([]cache.DoneChecker, 0, len(c.registrations)+1)
	for _, r := range c.registrations {
		synced = append(synced, r.HasSyncedChecker())
	}
	if c.opts.MeshSynced != nil {
		synced = append(synced, c.opts.MeshSynced)
	}
	if !cache.WaitFor(ctx, "", synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("kube registry: informer caches did not sync")
	}

	// From here on handlers queue what changes: the first model, built
	// below, reads the caches, which hold everything the initial lists
	// and the events before this point brought (an informer updates its
	// cache before it tells the handlers).
	c.listing.Store(false)

	// Build the whole first model before saying we are synced. Keys queued
	// meanwhile are rebuilt again by the workers; the store makes those
	// rebuilds silent.
	n := 0
	for _, scope := range c.scopes {
		for _, obj := range scope.services.GetStore().List() {
			svc := obj.(*corev1.Service)
			c.reconcile(serviceKey{svc.Namespace, svc.Name})
			n++
		}
	}
	c.synced.Store(true)
	svcs, eps := c.store.Len()
	c.log.Info("kubernetes registry synced", "services", svcs, "endpoints", eps,
		"kubernetesServices", n, "took", time.Since(start).Round(time.Millisecond))

	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext() {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// HasSynced reports whether every informer and handler has seen its
// initial list and the first model is built.
func (c *Controller) HasSynced() bool { return c.synced.Load() }

func (c *Controller) processNext() bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.reconcile(key)
	c.queue.Forget(key)
	return true
}

// reconcile rebuilds one service from the caches. It reads only local
// caches, so it cannot fail; a missing or out-of-scope service is removed.
func (c *Controller) reconcile(key serviceKey) {
	// Take the time before reading the caches: an event that arrives
	// while we read records a new time and queues the key again.
	c.observedMu.Lock()
	observed := c.observed[key]
	delete(c.observed, key)
	c.observedMu.Unlock()

	c.rebuilds.Add(1)
	hostname := model.ServiceHostname(key.name, key.namespace, c.opts.DomainSuffix)
	svc, eps := c.build(c.live, key)
	if svc == nil {
		c.store.DeleteObserved(hostname, observed)
		return
	}
	if c.store.UpdateObserved(svc, eps, observed) {
		c.log.Debug("service updated", "service", hostname, "endpoints", len(eps))
	}
}

// scopeFor returns the informers that watch a namespace, or nil.
func (c *Controller) scopeFor(namespace string) *namespacedInformers {
	if s, ok := c.scopes[metav1.NamespaceAll]; ok {
		return s
	}
	return c.scopes[namespace]
}

// namespace returns the cached namespace, or nil.
func (c *Controller) namespace(name string) *corev1.Namespace { return c.live.namespace(name) }

// SetMeshDiscoverySelectors puts MeshConfig's discoverySelectors in force
// beside those of Options.DiscoverySelectors (a namespace matching any of
// either is selected) and rebuilds the services of exactly the namespaces
// whose selection changes: those newly selected are added, those no
// longer selected deleted, each reported as usual. With
// Options.Namespaces, only services of those namespaces are ever kept.
// Safe to call at any time, before Run too; nil removes MeshConfig's
// selectors.
func (c *Controller) SetMeshDiscoverySelectors(selectors []labels.Selector) {
	before, after := c.selection.setMesh(selectors)
	// Namespaces holding services, not the namespace cache: a service
	// whose namespace is not (yet) cached changes too when one list is
	// empty and the other not.
	for _, scope := range c.scopes {
		for _, ns := range scope.services.GetIndexer().ListIndexFuncValues(cache.NamespaceIndex) {
			obj := c.namespace(ns)
			if selects(before, obj) != selects(after, obj) {
				c.enqueueNamespace(scope, ns)
			}
		}
	}
	c.log.Info("discovery selectors in force", "selectors", len(after), "fromMeshConfig", len(selectors))
}

func (c *Controller) node(name string) *corev1.Node { return c.live.node(name) }

// WorkloadByIP returns the pod that holds ip (see PodForIP; of any
// namespace), read live from the cache.
func (c *Controller) WorkloadByIP(ip string) *model.Workload {
	p := c.live.podByIP(metav1.NamespaceAll, ip)
	if p == nil {
		return nil
	}
	return kubeconv.ConvertWorkload(p, c.node(p.NodeName))
}

var (
	_ model.Controller     = (*Controller)(nil)
	_ model.WorkloadLookup = (*Controller)(nil)
)
