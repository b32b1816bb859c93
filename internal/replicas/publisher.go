package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

const (
	// ClientsAnnotation holds a replica's connected-client count on its
	// Lease.
	ClientsAnnotation = "meshpilot.io/clients"
	// The labels every replica puts on its Lease and selects its peers'
	// by, so that other Leases of the namespace (leader elections) are
	// neither read nor counted.
	nameLabel      = "app.kubernetes.io/name"
	nameValue      = "meshpilot"
	componentLabel = "app.kubernetes.io/component"
	componentValue = "replica-clients"

	// DefaultPeriod is how often a replica renews its Lease.
	DefaultPeriod = 5 * time.Second
	// livenessPeriods is how many renew periods a Lease may go without
	// renewal before its replica stops counting: one missed renewal is
	// a slow API server, three are a replica gone.
	livenessPeriods = 3
)

// Options configure a Publisher.
type Options struct {
	Client    *kubeapi.Client
	Namespace string
	// Name is the replica's name, its Lease's name and holder identity.
	Name string
	// Clients returns the replica's connected-client count now.
	Clients func() int
	// Period between renewals; DefaultPeriod when zero.
	Period time.Duration
	Log    *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Publisher publishes one replica's client count in its Lease and reads
// every replica's.
type Publisher struct {
	opts    Options
	factory kubeapi.Informers
	leases  coordinationlisters.LeaseNamespaceLister
	synced  cache.InformerSynced

	mu          sync.Mutex // guards lastContact, reachable, failing and own
	lastContact time.Time  // the last renewal the API server accepted
	reachable   bool       // the last renewal succeeded
	failing     bool       // the last renewal failed (logged once per outage)
	own         *coordinationv1.Lease
}

// New builds a Publisher; Run starts it.
func New(opts Options) (*Publisher, error) {
	if opts.Client == nil || opts.Namespace == "" || opts.Name == "" || opts.Clients == nil {
		return nil, errors.New("replicas: a client, a namespace, a name and a client count are required")
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// The informer is built here, not in Run, so that View may be called
	// from any goroutine at any time.
	inf := kubeapi.NewInformer(opts.Client.Leases(opts.Namespace), &coordinationv1.Lease{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector().String() },
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p := &Publisher{
		opts:   opts,
		leases: coordinationlisters.NewLeaseLister(inf.GetIndexer()).Leases(opts.Namespace),
		synced: inf.HasSynced,
	}
	if _, err := p.factory.Add(inf); err != nil {
		return nil, err
	}
	return p, nil
}

// Identity returns the replica's namespace and name. The namespace is
// explicit if set, else the Pod's (POD_NAMESPACE, from the downward API),
// else fallback; the name is the Pod's (POD_NAME), else the hostname,
// which is the Pod's name in a Pod too.
func Identity(explicit, fallback string) (ns, name string, err error) {
	ns = explicit
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		ns = fallback
	}
	if ns == "" {
		return "", "", errors.New("replicas: no namespace: set --system-namespace or POD_NAMESPACE")
	}
	name = os.Getenv("POD_NAME")
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return "", "", fmt.Errorf("replicas: no replica name: POD_NAME unset and %w", err)
		}
	}
	return ns, name, nil
}

// Run renews the Lease every period until ctx ends, then deletes it so
// that peers stop counting this replica at once rather than after the
// liveness window.
func (p *Publisher) Run(ctx context.Context) {
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()

	t := time.NewTicker(p.opts.Period)
	defer t.Stop()
	for {
		p.renew(ctx)
		select {
		case <-ctx.Done():
			p.delete()
			return
		case <-t.C:
		}
	}
}

func selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{nameLabel: nameValue, componentLabel: componentValue})
}

// View returns every replica's count as this replica sees it. When this
// replica cannot reach the API server, peers are judged at the last
// time it could, so that its own blindness does not make them look gone.
func (p *Publisher) View() View {
	p.mu.Lock()
	at, reachable := p.lastContact, p.reachable
	p.mu.Unlock()
	if !p.synced() {
		return View{}
	}
	if reachable {
		at = p.opts.Now()
	}
	list, err := p.leases.List(selector())
	if err != nil {
		return View{}
	}
	reps := make([]Replica, 0, len(list))
	for _, l := range list {
		reps = append(reps, fromLease(l))
	}
	v := Compute(reps, at, livenessPeriods*p.opts.Period)
	v.Reachable = reachable
	return v
}

func fromLease(l *coordinationv1.Lease) Replica {
	r := Replica{Name: l.Name}
	if l.Spec.HolderIdentity != nil {
		r.Name = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		r.Renewed = l.Spec.RenewTime.Time
	}
	// A count that does not parse counts as none: the replica is still
	// live and still takes its share.
	r.Clients, _ = strconv.Atoi(l.Annotations[ClientsAnnotation])
	return r
}

// renew writes the Lease with the count now: an update of the last
// version written, or a create (first time, or after someone deleted
// it), and on a conflict the current version is read and overwritten,
// since this replica is its Lease's only writer.
func (p *Publisher) renew(ctx context.Context) {
	now := p.opts.Now()
	err := p.write(ctx, now)
	p.mu.Lock()
	wasFailing := p.failing
	p.reachable, p.failing = err == nil, err != nil
	if err == nil {
		p.lastContact = now
	}
	p.mu.Unlock()
	lease := p.opts.Namespace + "/" + p.opts.Name
	switch {
	case err != nil && !wasFailing:
		p.opts.Log.Warn("replicas: cannot renew this replica's Lease; peers' counts are frozen and no stream is shed until it can",
			"lease", lease, "err", err)
	case err == nil && wasFailing:
		p.opts.Log.Info("replicas: this replica's Lease is renewed again", "lease", lease)
	}
}

func (p *Publisher) write(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Period)
	defer cancel()
	api := p.opts.Client.Leases(p.opts.Namespace)
	want := p.desired(now)
	p.mu.Lock()
	own := p.own
	p.mu.Unlock()
	var got *coordinationv1.Lease
	var err error
	if own != nil {
		want.ResourceVersion = own.ResourceVersion
		got, err = api.Update(ctx, want, metav1.UpdateOptions{})
	} else {
		got, err = api.Create(ctx, want, metav1.CreateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		var cur *coordinationv1.Lease
		if cur, err = api.Get(ctx, p.opts.Name, metav1.GetOptions{}); err == nil {
			want.ResourceVersion = cur.ResourceVersion
			got, err = api.Update(ctx, want, metav1.UpdateOptions{})
		}
	} else if apierrors.IsNotFound(err) {
		want.ResourceVersion = ""
		got, err = api.Create(ctx, want, metav1.CreateOptions{})
	}
	p.mu.Lock()
	if err == nil {
		p.own = got
	} else {
		p.own = nil
	}
	p.mu.Unlock()
	return err
}

func (p *Publisher) desired(now time.Time) *coordinationv1.Lease {
	holder := p.opts.Name
	secs := int32(livenessPeriods * p.opts.Period / time.Second)
	renew := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        p.opts.Name,
			Namespace:   p.opts.Namespace,
			Labels:      map[string]string{nameLabel: nameValue, componentLabel: componentValue},
			Annotations: map[string]string{ClientsAnnotation: strconv.Itoa(p.opts.Clients())},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &secs,
			RenewTime:            &renew,
		},
	}
}

// delete removes the Lease on shutdown, with a context of its own since
// the run's has ended.
func (p *Publisher) delete() {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.Period)
	defer cancel()
	err := p.opts.Client.Leases(p.opts.Namespace).Delete(ctx, p.opts.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		p.opts.Log.Warn("replicas: cannot delete this replica's Lease; peers stop counting it when it goes stale",
			"lease", p.opts.Namespace+"/"+p.opts.Name, "err", err)
	}
}
