package multicluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
)

// DefaultSyncTimeout bounds how long a replacement registry may take to
// sync before the old one is kept, and after which a new cluster that has
// not synced is in state clusterstate.Timeout.
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

// Registry is a remote cluster's registry: a model.Controller that takes
// MeshConfig's discoverySelectors at run time (*kube.Controller).
type Registry interface {
	model.Controller
	SetMeshDiscoverySelectors([]labels.Selector)
}

// NewRegistry builds the (not yet running) registry of a remote cluster
// from its kubeconfig, watching scope.
type NewRegistry func(clusterID string, cfg *rest.Config, scope Scope) (Registry, error)

// Options configure a Controller.
type Options struct {
	// Secrets lists and watches the local cluster's Secrets of
	// Namespace (kubeapi.Client's Secrets(Namespace)).
	Secrets kubeapi.ListWatcher[*corev1.SecretList]
	// Namespace holds the remote Secrets (serve's --system-namespace).
	Namespace string
	// LocalClusterID is the local cluster's ID (--cluster-id): a Secret
	// key naming it is refused.
	LocalClusterID string
	// NewRegistry builds a remote cluster's registry.
	NewRegistry NewRegistry
	// Scope is what every remote registry watches where its Secret's
	// annotations do not say otherwise (serve's --namespaces and
	// --discovery-selectors).
	Scope Scope
	// MeshDiscoverySelectors are MeshConfig's discoverySelectors at
	// start; SetMeshDiscoverySelectors gives their changes.
	MeshDiscoverySelectors []labels.Selector
	// SyncTimeout: see DefaultSyncTimeout (its default).
	SyncTimeout time.Duration
	// ProbeInterval: how often a remote API server is probed once its
	// cluster has synced; DefaultProbeInterval when zero.
	ProbeInterval time.Duration
	// InsecureKubeconfigOptions are the kubeconfig credentials a remote
	// Secret may use although they run a command or read a file of
	// meshpilot's (OptionExec, OptionTokenFile, OptionClientCertificate,
	// OptionClientKey, an auth provider's name); none when empty: a
	// kubeconfig using one is refused and logged.
	InsecureKubeconfigOptions []string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// SourceName is the aggregate source name of a remote cluster; the
// prefix keeps it apart from the local sources' names.
func SourceName(clusterID string) string { return aggregate.RemoteSourcePrefix + clusterID }

// cluster is a remote cluster being served. Its fields are guarded by
// Controller.mu.
type cluster struct {
	id string
	// secret is the name of the Secret that holds it.
	secret string
	// sum identifies the kubeconfig and scope its registry was built from.
	sum [sha256.Size]byte
	// reg is the registry in force, built from config.
	reg    Registry
	config *rest.Config
	// stopWatch ends the watch of reg (its sync, then its API server).
	stopWatch context.CancelFunc
	// pending is the replacement waiting to sync; nil when none.
	pending *replacement
	status  status
}

// replacement is a registry built from a changed kubeconfig or scope,
// waiting for its sync off the worker, so that it holds up no other
// Secret.
type replacement struct {
	sum    [sha256.Size]byte
	reg    Registry
	config *rest.Config
	// cancel drops it (a newer change, the cluster removed); done is
	// closed once its goroutine has returned.
	cancel context.CancelFunc
	done   chan struct{}
}

// Controller follows the remote Secrets. One worker applies the Secrets'
// changes, so each Secret's in order and a cluster ID claimed by two
// Secrets goes to the first one seen; what may take long (a replacement
// syncing, the watch of each cluster) runs on goroutines of its own.
type Controller struct {
	opts    Options
	log     *slog.Logger
	factory kubeapi.Informers
	lister  listersv1.SecretLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	// sources is Run's; read by the worker and replacements alone.
	sources Sources
	// tasks counts the replacement and watch goroutines, which Run waits
	// for.
	tasks sync.WaitGroup
	// probe makes the check of a cluster's API server; readyz unless a
	// test sets it before Run.
	probe func(*rest.Config) func(context.Context) error

	// mu guards clusters (the map and each cluster's fields) and mesh:
	// the worker changes them, replacements and watches finish their
	// cluster's changes, Clusters and SetMeshDiscoverySelectors read them.
	mu sync.Mutex
	// clusters are the remote clusters served, by cluster ID.
	clusters map[string]*cluster
	// mesh are MeshConfig's discoverySelectors in force, given to every
	// registry built.
	mesh []labels.Selector
}

// New returns a Controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Secrets == nil || opts.NewRegistry == nil {
		return nil, errors.New("multicluster: Secrets and NewRegistry are required")
	}
	if opts.Namespace == "" {
		return nil, errors.New("multicluster: Namespace is required")
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := CheckInsecureKubeconfigOptions(opts.InsecureKubeconfigOptions); err != nil {
		return nil, fmt.Errorf("multicluster: %w", err)
	}
	selector := labels.SelectorFromSet(labels.Set{Label: LabelValue}).String()
	// Only the system namespace's labelled Secrets are listed and
	// watched: that is all the Role grants, and other Secrets never
	// reach memory.
	inf := kubeapi.NewInformer(opts.Secrets, &corev1.Secret{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector },
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c := &Controller{
		opts:   opts,
		log:    opts.Logger.With("component", "multicluster"),
		lister: listersv1.NewSecretLister(inf.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueName}),
		clusters: map[string]*cluster{},
		mesh:     opts.MeshDiscoverySelectors,
	}
	if len(opts.InsecureKubeconfigOptions) > 0 {
		c.log.Warn("remote kubeconfigs may use credentials that run commands or read files in meshpilot's container: whoever can write a Secret of the namespace can use them",
			"namespace", opts.Namespace, "allowed", opts.InsecureKubeconfigOptions)
	}
	if _, err := c.factory.Add(inf); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
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

// SetMeshDiscoverySelectors puts MeshConfig's discoverySelectors in force
// in every remote registry, as in the local one: beside the Secret's
// annotation or else serve's --discovery-selectors. Registries built
// later take them too. Safe to call at any time.
func (c *Controller) SetMeshDiscoverySelectors(selectors []labels.Selector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mesh = selectors
	for _, cl := range c.clusters {
		cl.reg.SetMeshDiscoverySelectors(selectors)
		if cl.pending != nil {
			cl.pending.reg.SetMeshDiscoverySelectors(selectors)
		}
	}
}

// Run follows the Secrets until ctx ends, adding, replacing and removing
// the remote clusters' registries in sources. The remote registries run
// on ctx too: they stop with it.
func (c *Controller) Run(ctx context.Context, sources Sources) error {
	if sources == nil {
		return errors.New("multicluster: Run needs the sources to add clusters to")
	}
	c.sources = sources
	defer c.tasks.Wait()
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
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
		c.log.Warn("remote secret", "secret", c.ref(name), "error", err)
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
		scope, scopeErr := scopeOf(s.Annotations, c.opts.Scope)
		var ae *annotationError
		if errors.As(scopeErr, &ae) {
			c.log.Error("remote secret annotation refused: its clusters keep their registries, new ones are not added",
				"secret", c.ref(name), "annotation", ae.annotation, "reason", ae.err)
		}
		for _, k := range parseSecret(s, c.opts.InsecureKubeconfigOptions) {
			wanted[k.clusterID] = true
			if scopeErr == nil {
				c.apply(ctx, name, k, scope)
			}
		}
	}
	c.mu.Lock()
	var gone []*cluster
	for id, cl := range c.clusters {
		if cl.secret == name && !wanted[id] {
			gone = append(gone, cl)
		}
	}
	c.mu.Unlock()
	for _, cl := range gone {
		c.remove(cl)
	}
	return nil
}

func (c *Controller) ref(secret string) string { return c.opts.Namespace + "/" + secret }

// clusterSum identifies what a cluster's registry is built from: a change
// of either the kubeconfig or the scope rebuilds it.
func clusterSum(k kubeconfig, scope Scope) [sha256.Size]byte {
	h := sha256.New()
	h.Write(k.sum[:])
	h.Write([]byte(scope.String()))
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// apply adds or replaces the cluster of one Secret key.
func (c *Controller) apply(ctx context.Context, secret string, k kubeconfig, scope Scope) {
	log := c.log.With("cluster", k.clusterID, "secret", c.ref(secret), "key", k.clusterID)
	if k.clusterID == c.opts.LocalClusterID {
		log.Error("remote secret names the local cluster (--cluster-id): refused")
		return
	}
	sum := clusterSum(k, scope)
	// Only this worker changes which clusters exist and their secret and
	// sum; replacements finishing change sum, hence the lock.
	c.mu.Lock()
	cur := c.clusters[k.clusterID]
	var curSecret string
	var curSum, pendingSum [sha256.Size]byte
	pending := false
	if cur != nil {
		curSecret, curSum = cur.secret, cur.sum
		if cur.pending != nil {
			pending, pendingSum = true, cur.pending.sum
		}
	}
	c.mu.Unlock()
	switch {
	case cur != nil && curSecret != secret:
		log.Error("cluster ID already served from another secret: refused", "served_from", c.ref(curSecret))
		return
	case pending && pendingSum == sum:
		// Being replaced by this very version already.
		return
	case cur != nil && curSum == sum:
		// Back to the registry in force: a replacement on its way is
		// dropped.
		c.dropPending(cur)
		return
	case k.err != nil:
		log.Error("remote secret key is not a usable kubeconfig: nothing changed", "reason", k.err)
		return
	}
	if len(k.insecure) > 0 {
		log.Warn("remote kubeconfig uses credentials that run a command or read a file in meshpilot's container, allowed by --insecure-multicluster-kubeconfig-options",
			"options", k.insecure)
	}
	if cur != nil {
		// Changes of one cluster are applied in order: an older
		// replacement still syncing gives way to this one.
		c.dropPending(cur)
	}
	reg, err := c.opts.NewRegistry(k.clusterID, k.config, scope)
	if err != nil {
		log.Error("building the remote cluster's registry: nothing changed", "reason", err)
		return
	}
	src := aggregate.Source{Name: SourceName(k.clusterID), Controller: reg}
	if cur == nil {
		c.add(ctx, log, &cluster{id: k.clusterID, secret: secret, sum: sum, reg: reg, config: k.config}, src, scope)
		return
	}
	c.mu.Lock()
	reg.SetMeshDiscoverySelectors(c.mesh)
	wait, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
	p := &replacement{sum: sum, reg: reg, config: k.config, cancel: cancel, done: make(chan struct{})}
	cur.pending = p
	c.mu.Unlock()
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		defer close(p.done)
		defer cancel()
		c.replace(ctx, wait, log, cur, p, src, scope)
	}()
}

// add serves a new cluster.
func (c *Controller) add(ctx context.Context, log *slog.Logger, cl *cluster, src aggregate.Source, scope Scope) {
	c.mu.Lock()
	cl.reg.SetMeshDiscoverySelectors(c.mesh)
	cl.status = status{state: clusterstate.Syncing, since: time.Now()}
	c.clusters[cl.id] = cl
	c.mu.Unlock()
	if err := c.sources.AddSource(ctx, src); err != nil {
		c.mu.Lock()
		delete(c.clusters, cl.id)
		c.mu.Unlock()
		log.Error("adding the remote cluster", "error", err)
		return
	}
	log.Info("remote cluster added", "apiserver", cl.config.Host, "scope", scope)
	c.startWatch(ctx, log, cl, false)
}

// replace waits, until wait ends, for p to sync and then swaps it in.
func (c *Controller) replace(ctx, wait context.Context, log *slog.Logger, cl *cluster, p *replacement, src aggregate.Source, scope Scope) {
	err := c.sources.ReplaceSource(wait, src.Name, src)
	c.mu.Lock()
	if cl.pending == p {
		cl.pending = nil
	}
	if err == nil {
		cl.sum, cl.reg, cl.config = p.sum, p.reg, p.config
	}
	c.mu.Unlock()
	switch {
	case err == nil:
		log.Info("remote cluster's registry rebuilt: kubeconfig replaced or scope changed", "apiserver", p.config.Host, "scope", scope)
		c.startWatch(ctx, log, cl, true)
	case errors.Is(err, context.Canceled) && ctx.Err() == nil:
		log.Info("remote cluster's replacement dropped for a newer change of its secret")
	case ctx.Err() == nil:
		// The old registry goes on serving; a later change of the
		// Secret tries again.
		log.Error("remote cluster's new kubeconfig or scope: keeping the previous one", "apiserver", p.config.Host, "reason", err)
		c.setLastError(cl, err)
	}
}

// dropPending cancels cl's replacement, if any, and waits for it to end.
func (c *Controller) dropPending(cl *cluster) {
	c.mu.Lock()
	p := cl.pending
	c.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// remove stops serving cl.
func (c *Controller) remove(cl *cluster) {
	c.dropPending(cl)
	log := c.log.With("cluster", cl.id, "secret", c.ref(cl.secret))
	if err := c.sources.RemoveSource(SourceName(cl.id)); err != nil {
		log.Error("removing remote cluster", "error", err)
	} else {
		log.Info("remote cluster removed")
	}
	c.mu.Lock()
	if cl.stopWatch != nil {
		cl.stopWatch()
	}
	delete(c.clusters, cl.id)
	c.mu.Unlock()
	c.requeueClaimants(cl.id, cl.secret)
}

// requeueClaimants queues the other Secrets that name cluster id: one was
// refused while the Secret that held it served it, and may take it now.
func (c *Controller) requeueClaimants(id, holder string) {
	secrets, err := c.lister.Secrets(c.opts.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, s := range secrets {
		if _, ok := s.Data[id]; ok && s.Name != holder {
			c.queue.Add(s.Name)
		}
	}
}
