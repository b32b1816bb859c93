package kubeapi

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListWatcher is what an informer uses of a typed client: a Resource, or
// a generated clientset's typed client (a fake one in tests); L is its
// list type.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewInformer returns an informer of r's kind (example is one object of
// it) with no resync, whose lists and watches go through tweak first (a
// label or field selector) when it is not nil: what client-go's generated
// NewFiltered<Kind>Informer builds. An r that says it does not support
// watch-list streaming (IsWatchListSemanticsUnSupported, as fake
// clientsets do) is listed and watched the old way.
func NewInformer[L runtime.Object](r ListWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions), indexers cache.Indexers) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return r.Watch(ctx, o)
		},
	}
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, r), example, 0, indexers)
}

// Informers starts and stops a set of informers, as a client-go informer
// factory does for the informers it built. Safe for concurrent use.
type Informers struct {
	// Transform, when set, is given to every informer added (before it
	// starts, as client-go requires).
	Transform cache.TransformFunc

	mu       sync.Mutex // guards all, started and stopping
	all      []cache.SharedIndexInformer
	started  map[cache.SharedIndexInformer]bool
	stopping bool
	running  sync.WaitGroup
}

// Add registers inf, to be run by the next Start, and returns it.
func (f *Informers) Add(inf cache.SharedIndexInformer) (cache.SharedIndexInformer, error) {
	if f.Transform != nil {
		if err := inf.SetTransform(f.Transform); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = append(f.all, inf)
	return inf, nil
}

// Start runs every added informer not running yet until stop is closed.
// After Shutdown it does nothing.
func (f *Informers) Start(stop <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return
	}
	if f.started == nil {
		f.started = map[cache.SharedIndexInformer]bool{}
	}
	for _, inf := range f.all {
		if f.started[inf] {
			continue
		}
		f.started[inf] = true
		f.running.Go(func() { inf.Run(stop) })
	}
}

// Shutdown waits for the started informers to end (their stop channel
// must be closed) and makes later Starts do nothing.
func (f *Informers) Shutdown() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	f.running.Wait()
}
