package gwstatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// DefaultLeaseName is the election's Lease, in meshpilot's namespace.
const DefaultLeaseName = "meshpilot-gateway-status"

// conflictRetries is how many times one route is read again and written
// after a conflict (someone else wrote it in between) before the route
// goes back to the queue with a rate-limited delay.
const conflictRetries = 5

// Options configure a KubeWriter.
type Options struct {
	// Config reaches the API server, for the routes.
	Config *rest.Config
	// Client is meshpilot's narrow client, for the election's Lease.
	Client *kubeapi.Client
	// ControllerName is the controllerName of meshpilot's status
	// entries; DefaultControllerName when empty.
	ControllerName string
	// Namespace and LeaseName locate the election's Lease; LeaseName is
	// DefaultLeaseName when empty.
	Namespace, LeaseName string
	// Identity is this replica's holderIdentity; see Identity.
	Identity string
	// The election's timings; client-go's defaults when zero. A leader
	// stops writing when it has not renewed for RenewDeadline; another
	// replica takes the Lease LeaseDuration after it last saw it renewed.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers is how many routes are written at once; 1 when zero.
	Workers int
	// QueueMetrics exports the work queue's metrics; none when nil.
	QueueMetrics workqueue.MetricsProvider
	Log          *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// KubeWriter is the Writer that writes routes' status to the API server.
// Every replica holds the desired status of every route (Set and Delete
// only record it); the replica holding the election's Lease writes it,
// and only what differs from what the route holds, so that the replicas
// agreeing on the desired status agree on the bytes and a change of
// leader writes nothing. Writing a route's status changes neither its
// spec nor its metadata.generation, so it reaches no registry as a change
// and costs no push.
//
// Set, Delete and Leading are safe for concurrent use; Run is called
// once.
type KubeWriter struct {
	opts       Options
	controller gatewayv1.GatewayController
	routes     map[string]routeAPI
	elector    *elector
	leading    atomic.Bool

	// wake is closed by the first Set or Delete: a replica campaigns only
	// once there is a route of the mesh, so that a cluster without any
	// costs no Lease renewals.
	wake     chan struct{}
	wakeOnce sync.Once

	mu sync.Mutex // guards desired, gone and queue
	// desired holds the status meshpilot means each route to have.
	desired map[routeKey]RouteStatus
	// gone holds the routes Deleted whose entries of ours may still be
	// on the object, until a write or a read finding none clears them.
	// Nothing is kept of a route once cleared, so that routes come and
	// go without leaving a trace here; a route Deleted again costs the
	// leader one more read. The value is the Delete's number (seq), so
	// that a sync clears only the Delete it saw, not a later one.
	gone map[routeKey]uint64
	seq  uint64
	// queue holds the routes to check while this replica leads; nil
	// otherwise.
	queue workqueue.TypedRateLimitingInterface[routeKey]
}

type routeKey struct{ kind, namespace, name string }

func (k routeKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

var _ Writer = (*KubeWriter)(nil)

// NewKubeWriter builds a KubeWriter; Run starts it.
func NewKubeWriter(opts Options) (*KubeWriter, error) {
	if opts.Config == nil || opts.Client == nil || opts.Namespace == "" || opts.Identity == "" {
		return nil, errors.New("gwstatus: a config, a client, the Lease's namespace and an identity are required")
	}
	opts.ControllerName = or(opts.ControllerName, DefaultControllerName)
	if err := CheckControllerName(opts.ControllerName); err != nil {
		return nil, fmt.Errorf("gwstatus: %w", err)
	}
	opts.LeaseName = or(opts.LeaseName, DefaultLeaseName)
	opts.LeaseDuration = or(opts.LeaseDuration, DefaultLeaseDuration)
	opts.RenewDeadline = or(opts.RenewDeadline, DefaultRenewDeadline)
	opts.RetryPeriod = or(opts.RetryPeriod, DefaultRetryPeriod)
	opts.Workers = or(opts.Workers, 1)
	if opts.LeaseDuration <= opts.RenewDeadline || opts.RenewDeadline <= opts.RetryPeriod {
		return nil, fmt.Errorf("gwstatus: want lease duration %v > renew deadline %v > retry period %v", opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	routes, err := newRouteAPIs(opts.Config)
	if err != nil {
		return nil, err
	}
	return &KubeWriter{
		opts:       opts,
		controller: gatewayv1.GatewayController(opts.ControllerName),
		routes:     routes,
		elector: &elector{
			leases: opts.Client.Leases(opts.Namespace), name: opts.LeaseName, identity: opts.Identity,
			leaseDuration: opts.LeaseDuration, renewDeadline: opts.RenewDeadline, retryPeriod: opts.RetryPeriod,
			log: opts.Log, now: opts.Now,
		},
		wake:    make(chan struct{}),
		desired: map[routeKey]RouteStatus{},
		gone:    map[routeKey]uint64{},
	}, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Identity is a replica's name in the election: its Pod's name (POD_NAME,
// from the downward API), unique among live Pods, so that a container
// restarted in the same Pod takes its Lease back at once; else its
// hostname with a random suffix, since two processes of one host must
// never take each other for the holder.
func Identity() (string, error) {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name, nil
	}
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("gwstatus: no identity: POD_NAME unset and %w", err)
	}
	return name + "_" + utilrand.String(5), nil
}

// Set records the status s.Kind's route s.Namespace/s.Name should have.
func (w *KubeWriter) Set(s RouteStatus) {
	k := routeKey{s.Kind, s.Namespace, s.Name}
	s.Parents = deepCopyParents(s.Parents)
	w.mu.Lock()
	old, had := w.desired[k]
	same := had && apiequality.Semantic.DeepEqual(old, s)
	if !same {
		w.desired[k] = s
		delete(w.gone, k)
		w.enqueueLocked(k)
	}
	w.mu.Unlock()
	w.wakeOnce.Do(func() { close(w.wake) })
}

// Delete forgets a route's desired status; its entries of ours are
// removed if it still exists. The leader reads the route once for each
// Delete of a route that has no desired status, so that entries of ours
// left from before (a Service parent removed while no replica led) go
// too.
func (w *KubeWriter) Delete(kind, namespace, name string) {
	k := routeKey{kind, namespace, name}
	w.mu.Lock()
	if _, pending := w.gone[k]; !pending {
		delete(w.desired, k)
		w.seq++
		w.gone[k] = w.seq
		w.enqueueLocked(k)
	}
	w.mu.Unlock()
	w.wakeOnce.Do(func() { close(w.wake) })
}

func (w *KubeWriter) enqueueLocked(k routeKey) {
	if w.queue != nil {
		w.queue.Add(k)
	}
}

// Leading says whether this replica holds the Lease and writes.
func (w *KubeWriter) Leading() bool { return w.leading.Load() }

// Run takes part in the election until ctx ends, writing while it leads,
// and releases the Lease on the way out so that another replica takes
// over at once.
func (w *KubeWriter) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-w.wake:
	}
	w.elector.campaign(ctx, w.lead)
}

// lead writes until ctx ends (leadership lost or shutdown): a queue of
// its own, filled with every route known, and workers that stop with it.
// A write under way when ctx ends is abandoned with it.
func (w *KubeWriter) lead(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[routeKey](),
		workqueue.TypedRateLimitingQueueConfig[routeKey]{Name: "gateway_status", MetricsProvider: w.opts.QueueMetrics})
	w.mu.Lock()
	w.queue = q
	// A new leader checks every route: the previous one may have died
	// before writing what changed meanwhile.
	for k := range w.desired {
		q.Add(k)
	}
	for k := range w.gone {
		q.Add(k)
	}
	w.mu.Unlock()
	w.leading.Store(true)

	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Go(func() {
			for w.processNext(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	w.leading.Store(false)
	w.mu.Lock()
	w.queue = nil
	w.mu.Unlock()
	q.ShutDown()
	wg.Wait()
}

func (w *KubeWriter) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[routeKey]) bool {
	k, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(k)
	err := w.sync(ctx, k)
	switch {
	case err == nil:
		q.Forget(k)
	case ctx.Err() != nil:
		// Leadership ended: the next leader checks every route.
	default:
		w.opts.Log.Warn("gateway status: cannot write a route's status; retrying", "route", k.String(), "err", err)
		q.AddRateLimited(k)
	}
	return true
}

// sync makes route k's entries of ours what its desired status says,
// reading the route afresh for each try.
func (w *KubeWriter) sync(ctx context.Context, k routeKey) error {
	api, ok := w.routes[k.kind]
	if !ok {
		return nil // not a kind whose status meshpilot writes
	}
	for range conflictRetries {
		w.mu.Lock()
		want, has := w.desired[k]
		deleted, isGone := w.gone[k]
		w.mu.Unlock()
		if !has && !isGone {
			return nil
		}
		r, found, err := api.read(ctx, k.namespace, k.name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		// A NotFound list: the kind's CRD is not installed, so no
		// route of the kind exists either.
		if err != nil || !found {
			w.clearGone(k, deleted)
			return nil
		}
		var parents []ParentStatus
		if has {
			if want.Generation != r.generation {
				// Computed from another version of the route than the
				// one stored: the conversion sets this one's in turn.
				// Writing it would tell of a spec the route no longer
				// has, and a lagging replica taking the lead would
				// flap the status back.
				return nil
			}
			parents = want.Parents
		}
		next := mergeParents(*r.parents, parents, w.controller, k.namespace, r.generation, metav1.NewTime(w.opts.Now()).Rfc3339Copy())
		if apiequality.Semantic.DeepEqual(next, *r.parents) {
			w.clearGone(k, deleted)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		*r.parents = next
		err = api.writeStatus(ctx, r)
		if err == nil {
			w.clearGone(k, deleted)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("%d conflicting writes in a row", conflictRetries)
}

// clearGone forgets a Deleted route whose entries of ours are gone,
// unless it was Deleted again (or Set) since the sync read deleted.
func (w *KubeWriter) clearGone(k routeKey, deleted uint64) {
	w.mu.Lock()
	if seq, ok := w.gone[k]; ok && seq == deleted {
		delete(w.gone, k)
	}
	w.mu.Unlock()
}

func deepCopyParents(ps []ParentStatus) []ParentStatus {
	if ps == nil {
		return nil
	}
	out := make([]ParentStatus, len(ps))
	for i, p := range ps {
		out[i] = ParentStatus{ParentRef: *p.ParentRef.DeepCopy()}
		if p.Conditions != nil {
			out[i].Conditions = make([]metav1.Condition, len(p.Conditions))
			for j := range p.Conditions {
				p.Conditions[j].DeepCopyInto(&out[i].Conditions[j])
			}
		}
	}
	return out
}
