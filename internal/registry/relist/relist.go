// Package relist lets the owner of informers make them list again, the
// repair for a cache that missed a watch event (internal/audit finds
// them): wrap the informers' ListerWatcher with a Relister, and call
// Relist.
package relist

import (
	"context"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Relister wraps the ListerWatchers of informers (typically those of one
// kind) so that their reflectors can be told to list again. Safe for
// concurrent use.
//
// A reflector lists again whenever its watch ends with an error: that is
// how client-go recovers from 410 Gone after etcd compaction, and the
// handlers are built for it (every object comes back as an update,
// unchanged ones are skipped by resourceVersion, vanished ones as
// deletes). Ending the open watches with the same "Expired" error reuses
// that path, keeps the informers, their caches, indexes and handler
// registrations, and costs one LIST (or one watch-list stream) of the
// kind. Recreating the informers instead would need handlers added
// again and deletes found by hand.
type Relister struct {
	mu      sync.Mutex // guards watches
	watches map[*relistableWatch]struct{}
}

// New returns a Relister with no watch yet.
func New() *Relister {
	return &Relister{watches: map[*relistableWatch]struct{}{}}
}

// Wrap returns lw with its watches registered for Relist; it is both a
// cache.ListerWatcher (what informers take) and a
// cache.ListerWatcherWithContext.
func (r *Relister) Wrap(lw cache.ListerWatcherWithContext) cache.ListerWatcher {
	return &relistableLW{inner: lw, r: r}
}

// Relist ends every open watch with an Expired error, so that each
// reflector lists again (after its usual short backoff), and returns how
// many it ended; 0 when none was open (an informer between two watches
// lists anyway, or is not started).
func (r *Relister) Relist() int {
	r.mu.Lock()
	ws := make([]*relistableWatch, 0, len(r.watches))
	for w := range r.watches {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	for _, w := range ws {
		w.expire()
	}
	return len(ws)
}

func (r *Relister) add(w *relistableWatch) {
	r.mu.Lock()
	r.watches[w] = struct{}{}
	r.mu.Unlock()
}

func (r *Relister) remove(w *relistableWatch) {
	r.mu.Lock()
	delete(r.watches, w)
	r.mu.Unlock()
}

type relistableLW struct {
	inner cache.ListerWatcherWithContext
	r     *Relister
}

func (l *relistableLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.inner.ListWithContext(ctx, opts)
}

// List and Watch make a cache.ListerWatcher, which informers take;
// reflectors call the context variants.
func (l *relistableLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *relistableLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *relistableLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.inner.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	rw := &relistableWatch{
		inner:   w,
		out:     make(chan watch.Event),
		stopped: make(chan struct{}),
		expired: make(chan struct{}),
		r:       l.r,
	}
	l.r.add(rw)
	go rw.forward()
	return rw, nil
}

// IsWatchListSemanticsUnSupported passes on what the wrapped
// ListerWatcher says (client-go asks it to decide on watch-list
// streaming; fake clientsets say no).
func (l *relistableLW) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.inner.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// relistableWatch forwards a watch until it is stopped or expired.
type relistableWatch struct {
	inner   watch.Interface
	out     chan watch.Event
	stopped chan struct{} // closed by Stop
	expired chan struct{} // closed by expire
	stop    sync.Once
	expire1 sync.Once
	r       *Relister
}

// expiredEvent is what the API server sends when a watch's
// resourceVersion is too old; the reflector lists again on it.
var expiredEvent = watch.Event{Type: watch.Error, Object: &metav1.Status{
	Status:  metav1.StatusFailure,
	Code:    http.StatusGone,
	Reason:  metav1.StatusReasonExpired,
	Message: "relist requested by meshpilot",
}}

func (w *relistableWatch) forward() {
	defer close(w.out)
	defer w.r.remove(w)
	defer w.inner.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stopped:
			return
		case <-w.expired:
			w.sendExpired()
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stopped:
				return
			case <-w.expired:
				// The event is dropped: the relist that follows reads
				// the kind afresh.
				w.sendExpired()
				return
			}
		}
	}
}

func (w *relistableWatch) sendExpired() {
	select {
	case w.out <- expiredEvent:
	case <-w.stopped:
	}
}

func (w *relistableWatch) expire() { w.expire1.Do(func() { close(w.expired) }) }

// Stop implements watch.Interface.
func (w *relistableWatch) Stop() { w.stop.Do(func() { close(w.stopped) }) }

// ResultChan implements watch.Interface.
func (w *relistableWatch) ResultChan() <-chan watch.Event { return w.out }

// TypedClient is what informers use of a typed client
// (CoreV1().Services(ns), NetworkingV1().VirtualServices(ns), ...); L is
// its list type.
type TypedClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ListFunc lists one page through c: a pager.ListPageFunc, also what a
// cache.ListWatch lists with.
func ListFunc[L runtime.Object](c TypedClient[L]) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
}

// Informer builds an informer of c's kind (example is one object of it)
// whose watches r can end, with indexers (nil for none: each index costs a
// set per value). client is the clientset c comes from, which says
// whether it supports watch-list streaming (fake clientsets do not).
func Informer[L runtime.Object](r *Relister, example runtime.Object, c TypedClient[L], client any, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  ListFunc(c),
		WatchFuncWithContext: c.Watch,
	}, client)
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	return cache.NewSharedIndexInformer(r.Wrap(cache.ToListerWatcherWithContext(lw)), example, resync, indexers)
}
