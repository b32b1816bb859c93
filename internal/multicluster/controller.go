package multicluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
)

// DefaultSyncTimeout bounds how long a replacement registry may take to
// sync before the old one is kept, and when a new cluster that has not
// synced is logged.
const DefaultSyncTimeout = 10 * time.Second

// QueueName names the work queue of remote Secrets.
const QueueName = "meshpilot_remote_secrets"

// Sources is the part of the aggregate that takes sources at run time;
// *aggregate.Controller implements it.
type Sources interface {
	AddSource(ctx context.Context, s aggregate.Source) error
	RemoveSource(name string) error
	ReplaceSource(ctx context.Context, name string, s aggregate.Source) error
}

// NewRegistry builds the (not yet running) registry of a remote cluster
// from its kubeconfig.
type NewRegistry func(clusterID string, cfg *rest.Config) (model.Controller, error)

// Options configure a Controller.
type Options struct {
	// Client reads the local cluster's Secrets.
	Client kubernetes.Interface
	// Namespace holds the remote Secrets (serve's --system-namespace).
	Namespace string
	// LocalClusterID is the local cluster's ID (--cluster-id): a Secret
	// key naming it is refused.
	LocalClusterID string
	// Sources receives the remote registries.
	Sources Sources
	// NewRegistry builds a remote cluster's registry.
	NewRegistry NewRegistry
	// SyncTimeout: see DefaultSyncTimeout (its default).
	SyncTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// SourceName is the aggregate source name of a remote cluster; the
// prefix keeps it apart from the local sources' names.
func SourceName(clusterID string) string { return aggregate.RemoteSourcePrefix + clusterID }

// cluster is a remote cluster being served.
type cluster struct {
	// secret is the name of the Secret that holds it.
	secret string
	// sum identifies the kubeconfig its registry was built from.
	sum [sha256.Size]byte
	// stopReport ends the wait for its first registry's sync, once that
	// registry is removed or replaced.
	stopReport context.CancelFunc
}

// Controller follows the remote Secrets. Its state is touched by its one
// worker goroutine alone, so it needs no lock.
type Controller struct {
	opts    Options
	log     *slog.Logger
	factory informers.SharedInformerFactory
	lister  listersv1.SecretLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	// clusters are the remote clusters served, by cluster ID; the worker's
	// alone.
	clusters map[string]cluster
}

// New returns a Controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil || opts.Sources == nil || opts.NewRegistry == nil {
		return nil, errors.New("multicluster: Client, Sources and NewRegistry are required")
	}
	if opts.Namespace == "" {
		return nil, errors.New("multicluster: Namespace is required")
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	selector := labels.SelectorFromSet(labels.Set{Label: LabelValue}).String()
	// Only the system namespace's labelled Secrets are listed and
	// watched: that is all the Role grants, and other Secrets never
	// reach memory.
	factory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
		informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Secrets()
	c := &Controller{
		opts:    opts,
		log:     opts.Logger.With("component", "multicluster"),
		factory: factory,
		lister:  inf.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueName}),
		clusters: map[string]cluster{},
	}
	reg, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			// A relist sends every Secret again unchanged.
			o, ok1 := old.(*corev1.Secret)
			n, ok2 := cur.(*corev1.Secret)
			if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
				return
			}
			c.enqueue(cur)
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, err
	}
	c.synced = reg.HasSynced
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Warn("remote secret without a key", "error", err)
		return
	}
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	c.queue.Add(name)
}

// HasSynced reports whether the Secrets present at start have been seen
// (their clusters added, not synced).
func (c *Controller) HasSynced() bool { return c.synced() }

// Run follows the Secrets until ctx ends. The remote registries run on
// ctx too: they stop with it.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	// One worker: a Secret's clusters are changed in order, and a
	// replacement waiting for its sync holds up only other Secrets.
	for c.processNext(ctx) {
	}
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		c.log.Warn("remote secret", "secret", c.opts.Namespace+"/"+name, "error", err)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync brings the clusters of Secret name in line with its data.
func (c *Controller) sync(ctx context.Context, name string) error {
	s, err := c.lister.Secrets(c.opts.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		s = nil
	case err != nil:
		return err
	}
	wanted := map[string]bool{}
	if s != nil {
		for _, k := range parseSecret(s) {
			wanted[k.clusterID] = true
			c.apply(ctx, name, k)
		}
	}
	for id, cl := range c.clusters {
		if cl.secret != name || wanted[id] {
			continue
		}
		if err := c.opts.Sources.RemoveSource(SourceName(id)); err != nil {
			c.log.Error("removing remote cluster", "cluster", id, "secret", c.ref(name), "error", err)
		} else {
			c.log.Info("remote cluster removed", "cluster", id, "secret", c.ref(name))
		}
		cl.stopReport()
		delete(c.clusters, id)
	}
	return nil
}

func (c *Controller) ref(secret string) string { return c.opts.Namespace + "/" + secret }

// apply adds or replaces the cluster of one Secret key.
func (c *Controller) apply(ctx context.Context, secret string, k kubeconfig) {
	log := c.log.With("cluster", k.clusterID, "secret", c.ref(secret), "key", k.clusterID)
	if k.clusterID == c.opts.LocalClusterID {
		log.Error("remote secret names the local cluster (--cluster-id): refused")
		return
	}
	cur, served := c.clusters[k.clusterID]
	if served && cur.secret != secret {
		log.Error("cluster ID already served from another secret: refused", "served_from", c.ref(cur.secret))
		return
	}
	if served && cur.sum == k.sum {
		return
	}
	if k.err != nil {
		log.Error("remote secret key is not a usable kubeconfig: nothing changed", "reason", k.err)
		return
	}
	reg, err := c.opts.NewRegistry(k.clusterID, k.config)
	if err != nil {
		log.Error("building the remote cluster's registry: nothing changed", "reason", err)
		return
	}
	src := aggregate.Source{Name: SourceName(k.clusterID), Controller: reg}
	if !served {
		if err := c.opts.Sources.AddSource(ctx, src); err != nil {
			log.Error("adding the remote cluster", "error", err)
			return
		}
		reportCtx, stopReport := context.WithCancel(ctx)
		c.clusters[k.clusterID] = cluster{secret: secret, sum: k.sum, stopReport: stopReport}
		log.Info("remote cluster added", "apiserver", k.config.Host)
		go c.reportSync(reportCtx, log, reg)
		return
	}
	wait, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
	defer cancel()
	if err := c.opts.Sources.ReplaceSource(wait, src.Name, src); err != nil {
		// The old registry goes on serving; a later change of the
		// Secret tries again.
		log.Error("remote cluster's new kubeconfig: keeping the previous one", "apiserver", k.config.Host, "reason", err)
		return
	}
	// The replacement has synced: nothing is left to report.
	cur.stopReport()
	c.clusters[k.clusterID] = cluster{secret: secret, sum: k.sum, stopReport: cur.stopReport}
	log.Info("remote cluster's kubeconfig replaced", "apiserver", k.config.Host)
}

// reportSync logs a remote cluster that has not synced within
// SyncTimeout, which nothing waits for, and logs when it does sync.
func (c *Controller) reportSync(ctx context.Context, log *slog.Logger, reg model.Controller) {
	deadline := time.NewTimer(c.opts.SyncTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	late := false
	for !reg.HasSynced() {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			late = true
			log.Warn(fmt.Sprintf("remote cluster not synced after %s: served as it fills, readiness does not wait for it", c.opts.SyncTimeout))
		case <-tick.C:
		}
	}
	if late {
		log.Info("remote cluster synced")
	}
}
