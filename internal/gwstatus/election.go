package gwstatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// The election's defaults are client-go leaderelection's usual ones.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// The labels of the election's Lease: the deploy/ admission policy lets
// meshpilot's ServiceAccount write the Leases labelled as its own alone.
// The component differs from the replicas' client counts', so that
// replica balance neither reads nor counts it.
const (
	LeaseNameLabel      = "app.kubernetes.io/name"
	LeaseNameValue      = "meshpilot"
	LeaseComponentLabel = "app.kubernetes.io/component"
	LeaseComponentValue = "gateway-status-leader"
)

// elector is one candidate of a leader election on a coordination.k8s.io
// Lease, following client-go's leaderelection algorithm and Lease fields
// (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
// leaseTransitions), so that a Lease reads the same to kubectl and to
// other tools. It is written on internal/kubeapi's Lease client because
// client-go's leaderelection package imports the whole generated
// clientset and its informers, which would grow meshpilot's binary by
// about 15 MB and an idle process by about 10 MB.
//
// The safety argument is client-go's: a candidate judges a Lease expired
// by its own clock, from when it last saw the Lease change, never from
// the renewTime another clock wrote; a leader that has not renewed for
// renewDeadline (shorter than leaseDuration) stops leading before any
// other candidate can judge its Lease expired.
type elector struct {
	leases        *kubeapi.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	name          string // the Lease's
	identity      string // this candidate's holderIdentity
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	log           *slog.Logger
	now           func() time.Time

	// Owned by the goroutine running campaign.
	observed     *coordinationv1.Lease // the Lease as last read or written
	observedTime time.Time             // when observed last changed, by this clock
	failing      bool                  // the last read or write of the Lease failed (logged once per outage)
}

// campaign runs the election until ctx ends: it waits to acquire the
// Lease, runs lead with a context that ends as soon as leadership is lost
// (or ctx ends), and campaigns again after a loss. lead must return
// promptly once its context ends: the Lease is released, on ctx's end,
// only after lead has returned, so that no write of this leader's
// overlaps the next leader's.
func (e *elector) campaign(ctx context.Context, lead func(context.Context)) {
	for ctx.Err() == nil {
		if !e.acquire(ctx) {
			return
		}
		e.log.Info("gateway status: this replica leads and writes routes' status", "lease", e.name, "identity", e.identity)
		leadCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			lead(leadCtx)
		}()
		e.renew(leadCtx)
		cancel()
		<-done
		if ctx.Err() != nil {
			e.release()
			return
		}
		e.log.Warn("gateway status: this replica lost the lease and stopped writing routes' status", "lease", e.name, "identity", e.identity)
	}
}

// acquire tries every retryPeriod (jittered, so that candidates started
// together do not try in step) until the Lease is this candidate's; false
// when ctx ended first.
func (e *elector) acquire(ctx context.Context) bool {
	for {
		err := e.tryAcquireOrRenew(ctx)
		e.report(ctx, err)
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait.Jitter(e.retryPeriod, 0.2)):
		}
	}
}

// renew renews the Lease every retryPeriod until ctx ends or no renewal
// has succeeded for renewDeadline.
func (e *elector) renew(ctx context.Context) {
	last := e.now()
	t := time.NewTicker(e.retryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Each try may take at most what is left of the deadline: a
		// renewal that lands after it would extend a leadership this
		// replica has already given up.
		left := e.renewDeadline - e.now().Sub(last)
		if left <= 0 {
			return
		}
		tryCtx, cancel := context.WithTimeout(ctx, left)
		err := e.tryAcquireOrRenew(tryCtx)
		cancel()
		e.report(ctx, err)
		if err == nil {
			last = e.now()
			continue
		}
		if ctx.Err() != nil || errors.Is(err, errHeld) {
			// Another replica holds the Lease (it was taken over,
			// or released by hand): stop writing now rather than at
			// the deadline.
			return
		}
	}
}

var errHeld = errors.New("the lease is held by another replica")

// report logs the first failure to read or write the Lease (a Lease
// held by another replica is no failure) and the recovery after it:
// a replica that cannot take part (no RBAC, an admission policy refusing
// it) must say so once, not stay silent nor log every retry.
func (e *elector) report(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	reached := err == nil || errors.Is(err, errHeld)
	switch {
	case !reached && !e.failing:
		e.log.Warn("gateway status: cannot take or renew the lease; routes' status is written by whichever replica can", "lease", e.name, "err", err)
	case reached && e.failing:
		e.log.Info("gateway status: the lease is reachable again", "lease", e.name)
	}
	e.failing = !reached
}

// tryAcquireOrRenew reads the Lease and, when it is free, expired (by
// this clock) or already this candidate's, writes it as this candidate's,
// guarded by its resourceVersion.
func (e *elector) tryAcquireOrRenew(ctx context.Context) error {
	now := e.now()
	cur, err := e.leases.Get(ctx, e.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created, err := e.leases.Create(ctx, e.record(nil, now), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		e.observe(created, now)
		return nil
	}
	if err != nil {
		return err
	}
	if e.observed == nil || e.observed.ResourceVersion != cur.ResourceVersion {
		e.observe(cur, now)
	}
	holder := holderOf(cur)
	if holder != "" && holder != e.identity && e.observedTime.Add(durationOf(cur)).After(now) {
		return fmt.Errorf("%w (%s)", errHeld, holder)
	}
	next := e.record(cur, now)
	updated, err := e.leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	e.observe(updated, now)
	return nil
}

func (e *elector) observe(l *coordinationv1.Lease, now time.Time) {
	e.observed, e.observedTime = l, now
}

// record is the Lease as this candidate holds it at now: cur renewed when
// it already holds it, taken over (a new acquireTime, one more
// transition) otherwise.
func (e *elector) record(cur *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.name}}
	if cur != nil {
		l = cur.DeepCopy()
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LeaseNameLabel] = LeaseNameValue
	l.Labels[LeaseComponentLabel] = LeaseComponentValue
	mt := metav1.NewMicroTime(now)
	secs := int32(e.leaseDuration / time.Second)
	if cur == nil || holderOf(cur) != e.identity {
		var transitions int32
		if cur != nil && cur.Spec.LeaseTransitions != nil {
			transitions = *cur.Spec.LeaseTransitions + 1
		}
		l.Spec.AcquireTime = &mt
		l.Spec.LeaseTransitions = &transitions
	}
	id := e.identity
	l.Spec.HolderIdentity = &id
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &mt
	return l
}

// release gives the Lease up on shutdown, as client-go's ReleaseOnCancel
// does (no holder, a one-second duration), so that another replica takes
// over within a retry period rather than a lease duration. Its context is
// its own: the campaign's has ended.
func (e *elector) release() {
	if e.observed == nil || holderOf(e.observed) != e.identity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.retryPeriod)
	defer cancel()
	l := e.observed.DeepCopy()
	empty, one := "", int32(1)
	now := metav1.NewMicroTime(e.now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = &empty, &one, &now, &now
	if _, err := e.leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		e.log.Warn("gateway status: cannot release the lease; another replica takes over when it expires", "lease", e.name, "err", err)
	}
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func durationOf(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}
