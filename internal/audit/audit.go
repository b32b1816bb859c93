// Package audit proves the Kubernetes registry's caches and model equal
// to the cluster, or shows where they are not.
//
// An audit lists every watched kind afresh from the API server (a
// paginated, consistent LIST through client-go's pager, in the
// registry's own watch scope) and compares:
//
//   - each informer cache with the LIST, object by object, by UID and
//     resourceVersion, and for the kinds the informers' transform
//     rebuilds (Pods, Nodes) the fields it keeps; the Istio kinds
//     (Options.Sources: crd.Registry) too, those whose CRDs are
//     installed;
//   - the model with a model rebuilt from scratch from the LIST by the
//     registry's own conversion (kube.Controller.ModelFrom): services
//     field by field, and the endpoints of each service port.
//
// A watch event lost between the API server and meshpilot shows as a
// difference until something else touches the object, possibly forever:
// informers never relist by themselves. Run audits periodically and,
// when a difference outlives two audits, relists the kind (and rebuilds
// the services whose model differs), which repairs it.
//
// Only the local cluster is audited; remote clusters' registries
// (internal/multicluster) are not.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// Registry is what an audit reads and repairs: *kube.Controller.
type Registry interface {
	caches
	// ServiceDiscovery is the registry's model.
	model.ServiceDiscovery
	HasSynced() bool
	ModelFrom(objects map[string][]any) (*model.Store, error)
	Resync(namespace, name string)
}

// Source is a registry beside the Kubernetes one whose caches an audit
// compares with a LIST, by UID and resourceVersion, and relists:
// *crd.Registry (the Istio kinds).
type Source interface {
	caches
	// AuditKinds are the kinds to audit now.
	AuditKinds() []string
}

// caches are a registry's informer caches, what lists the same objects,
// and a relist.
type caches interface {
	Cached(kind string) []any
	ListPagers(kind string, pageSize int64) []*pager.ListPager
	Relist(kind string) (int, error)
}

// Observer is told of audits and relists; *metrics.Audits is one.
type Observer interface {
	// Audited reports one audit's differences by kind, every audited
	// kind present (0 for none).
	Audited(differences map[string]int)
	// Relisted reports a relist of kind because of differences that
	// outlived two audits.
	Relisted(kind string)
}

// DefaultPageSize is the LIST page size: the API server's own
// pagination unit for clients that list large collections.
const DefaultPageSize = 500

// Options configure an Auditor.
type Options struct {
	// Registry is audited. Required.
	Registry Registry
	// Kinds are the Registry's kinds listed and compared; default
	// kube.Kinds.
	Kinds []string
	// Sources are audited beside the Registry, after it; their kind
	// names must differ from the Registry's.
	Sources []Source
	// PageSize is the most objects one LIST request returns; default
	// DefaultPageSize.
	PageSize int64
	// Interval is Run's period between audits (jittered by up to 10 %);
	// zero or less: Run audits nothing.
	Interval time.Duration
	// Observer, when set, is told of each audit and relist.
	Observer Observer
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Auditor audits a registry on demand (Audit) and periodically (Run). It
// remembers each difference from one audit to the next, to say since
// when it is there. Safe for concurrent use; audits run one at a time.
type Auditor struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex // makes audits one at a time; guards seen
	seen map[diffKey]tracked
}

// New builds an Auditor.
func New(opts Options) (*Auditor, error) {
	if opts.Registry == nil {
		return nil, errors.New("audit: no registry")
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = kube.Kinds
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Auditor{opts: opts, log: opts.Logger.With("audit", "kubernetes"), seen: map[diffKey]tracked{}}, nil
}

// ErrNotSynced is Audit's error before the registry has built its first
// model: there is nothing to compare yet.
var ErrNotSynced = errors.New("audit: the Kubernetes registry has not synced yet")

// Audit lists every kind and compares. It fails only when the registry
// has not synced or a LIST fails.
func (a *Auditor) Audit(ctx context.Context) (Report, error) {
	if !a.opts.Registry.HasSynced() {
		return Report{}, ErrNotSynced
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	start := time.Now()
	rep := Report{Started: start, Listed: []Listed{}, Differences: []Difference{}}

	listed := make(map[string][]any, len(a.opts.Kinds))
	for _, kind := range a.opts.Kinds {
		objs, err := a.audit(ctx, a.opts.Registry, kind, &rep)
		if err != nil {
			return Report{}, err
		}
		listed[kind] = objs
	}
	for _, src := range a.opts.Sources {
		for _, kind := range src.AuditKinds() {
			if _, err := a.audit(ctx, src, kind, &rep); err != nil {
				return Report{}, err
			}
		}
	}
	rebuilt, err := a.opts.Registry.ModelFrom(listed)
	if err != nil {
		return Report{}, fmt.Errorf("audit: rebuilding the model from the LIST: %w", err)
	}
	rep.Services, _ = rebuilt.Len()
	if diffs := compareModels(a.opts.Registry, rebuilt); len(diffs) > 0 {
		// The model follows the caches through a work queue: what it
		// had not caught up with by the first comparison it may have
		// by the second.
		rep.Differences = append(rep.Differences, both(diffs, compareModels(a.opts.Registry, rebuilt))...)
	}
	a.seen = track(a.seen, rep.Differences, start)
	rep.Took = time.Since(start).Round(time.Millisecond).String()

	if a.opts.Observer != nil {
		counts := map[string]int{KindModelService: 0, KindModelEndpoint: 0}
		for _, l := range rep.Listed {
			counts[l.Kind] = 0
		}
		for _, d := range rep.Differences {
			counts[d.Kind]++
		}
		a.opts.Observer.Audited(counts)
	}
	return rep, nil
}

// audit lists one kind of src, compares it with src's caches into rep,
// and returns the listed objects.
func (a *Auditor) audit(ctx context.Context, src caches, kind string, rep *Report) ([]any, error) {
	// The cache is read before the LIST and again after it: an
	// object that changes meanwhile is older in the first read than
	// in the LIST and may be newer in the second, but only a
	// difference that both show is one.
	before := src.Cached(kind)
	objs, pages, err := a.list(ctx, src, kind)
	if err != nil {
		return nil, err
	}
	rep.Listed = append(rep.Listed, Listed{Kind: kind, Objects: len(objs), Pages: pages})
	if diffs := compareObjects(kind, before, objs); len(diffs) > 0 {
		rep.Differences = append(rep.Differences, both(diffs, compareObjects(kind, src.Cached(kind), objs))...)
	}
	return objs, nil
}

// list reads every object of kind, transformed as the informers
// transform them, and counts the LIST requests. The LIST is a consistent
// read (no resourceVersion): served as fresh as etcd.
func (a *Auditor) list(ctx context.Context, src caches, kind string) ([]any, int, error) {
	var objs []any
	pages := 0
	for _, p := range src.ListPagers(kind, a.opts.PageSize) {
		fn := p.PageFn
		p.PageFn = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			pages++
			return fn(ctx, o)
		}
		// One page at a time: the objects are kept anyway, and a
		// buffered pager would list ahead for nothing.
		p.PageBufferSize = 0
		err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
			t, err := kube.Transform(o)
			if err != nil {
				return err
			}
			objs = append(objs, t)
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("audit: listing %s: %w", kind, err)
		}
	}
	return objs, pages, nil
}

// both returns the differences of later that earlier found too.
func both(earlier, later []Difference) []Difference {
	found := make(map[diffKey]bool, len(earlier))
	for _, d := range earlier {
		found[d.key()] = true
	}
	return slices.DeleteFunc(later, func(d Difference) bool { return !found[d.key()] })
}

// sourceOf returns the source that audits kind, nil for none.
func (a *Auditor) sourceOf(kind string) caches {
	if slices.Contains(a.opts.Kinds, kind) {
		return a.opts.Registry
	}
	for _, src := range a.opts.Sources {
		if slices.Contains(src.AuditKinds(), kind) {
			return src
		}
	}
	return nil
}

// kindsOf returns the kinds of diffs once each, in their order.
func kindsOf(diffs []Difference) []string {
	var out []string
	for _, d := range diffs {
		if !slices.Contains(out, d.Kind) {
			out = append(out, d.Kind)
		}
	}
	return out
}
