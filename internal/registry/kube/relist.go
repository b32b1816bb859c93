package kube

import (
	"context"
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// relister wraps the ListerWatcher of one kind's informers so that their
// reflectors can be told to list again.
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
type relister struct {
	mu      sync.Mutex // guards watches
	watches map[*relistableWatch]struct{}
}

func newRelister() *relister {
	return &relister{watches: map[*relistableWatch]struct{}{}}
}

// wrap returns lw with its watches registered for relist.
func (r *relister) wrap(lw cache.ListerWatcherWithContext) *relistableLW {
	return &relistableLW{inner: lw, r: r}
}

// relist ends every open watch with an Expired error, so that each
// reflector lists again (after its usual short backoff), and returns how
// many it ended.
func (r *relister) relist() int {
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

func (r *relister) add(w *relistableWatch) {
	r.mu.Lock()
	r.watches[w] = struct{}{}
	r.mu.Unlock()
}

func (r *relister) remove(w *relistableWatch) {
	r.mu.Lock()
	delete(r.watches, w)
	r.mu.Unlock()
}

type relistableLW struct {
	inner cache.ListerWatcherWithContext
	r     *relister
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
	r       *relister
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
