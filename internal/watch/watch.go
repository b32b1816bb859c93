// Package watch prints the changes of Kubernetes resources as they happen,
// one line per ADDED, MODIFIED or DELETED event, with a short summary of
// each object. It backs the "meshpilot watch" command.
//
// Any resource the API server serves can be watched, custom resources
// included: names are resolved through discovery like kubectl does
// (plural, singular, short name, Kind, or <resource>.<group>), and objects
// are read through dynamic shared informers.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
)

// DefaultResources are watched when none are named.
var DefaultResources = []string{"services", "endpointslices", "pods", "nodes", "namespaces"}

// Output formats.
const (
	Text = "text"
	JSON = "json"
)

// Options says what to watch and how to print it.
type Options struct {
	// Resources as the user typed them; empty means DefaultResources.
	Resources []string
	// Namespaces to watch namespaced resources in; empty means all.
	// Cluster-scoped resources ignore it. See Namespaces.
	Namespaces []string
	// LabelSelector and FieldSelector filter on the server.
	LabelSelector string
	FieldSelector string
	// Output is Text (default) or JSON.
	Output string
	// Out receives the events; Log the diagnostics.
	Out io.Writer
	Log *slog.Logger
}

// Namespaces applies kubectl's rules: all namespaces with -A (it wins
// over -n), else the namespaces given with -n, else the default namespace
// of the kubeconfig's context. nil means all namespaces.
func Namespaces(flagNamespaces []string, allNamespaces bool, defaultNamespace string) []string {
	if allNamespaces {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range flagNamespaces {
		n = strings.TrimSpace(n)
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []string{defaultNamespace}
	}
	return out
}

// Target is a resolved resource.
type Target struct {
	// Arg is the name as given.
	Arg        string
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// NoResourceError is the error for a name the server does not serve.
type NoResourceError struct{ Name string }

func (e *NoResourceError) Error() string {
	return fmt.Sprintf("the server has no resource %q; see \"kubectl api-resources\" for the names it serves, and name custom resources <plural>.<group>", e.Name)
}

// Resolve maps names as kubectl accepts them to resources the server
// serves, dropping duplicates.
func Resolve(mapper meta.RESTMapper, args []string) ([]Target, error) {
	var out []Target
	seen := map[schema.GroupVersionResource]bool{}
	for _, arg := range args {
		arg = strings.TrimSpace(arg)
		if arg == "" {
			continue
		}
		name := strings.ToLower(arg)
		var gvr schema.GroupVersionResource
		var err error
		full, gr := schema.ParseResourceArg(name)
		if full != nil {
			gvr, err = mapper.ResourceFor(*full)
		}
		if full == nil || err != nil {
			gvr, err = mapper.ResourceFor(gr.WithVersion(""))
		}
		if err != nil {
			if meta.IsNoMatchError(err) {
				return nil, &NoResourceError{Name: arg}
			}
			return nil, fmt.Errorf("resolving %q: %w", arg, err)
		}
		gvk, err := mapper.KindFor(gvr)
		if err != nil {
			return nil, fmt.Errorf("resolving %q: %w", arg, err)
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("resolving %q: %w", arg, err)
		}
		if seen[mapping.Resource] {
			continue
		}
		seen[mapping.Resource] = true
		out = append(out, Target{
			Arg:        arg,
			GVR:        mapping.Resource,
			Kind:       gvk.Kind,
			Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
		})
	}
	if len(out) == 0 {
		return nil, errors.New("no resources to watch")
	}
	return out, nil
}

// Event is one printed change. In JSON output it is one object per line
// with exactly these fields.
type Event struct {
	Time            string            `json:"time"`
	Type            string            `json:"event"`
	Kind            string            `json:"kind"`
	APIVersion      string            `json:"apiVersion"`
	Namespace       string            `json:"namespace,omitempty"`
	Name            string            `json:"name"`
	ResourceVersion string            `json:"resourceVersion"`
	Summary         map[string]string `json:"summary,omitempty"`

	fields []Field
}

// TimeFormat is RFC 3339 with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Text formats the event as one line: time, event, kind,
// namespace/name, rv=<resourceVersion> and the summary as key=value.
func (e *Event) Text() string {
	var b strings.Builder
	id := e.Name
	if e.Namespace != "" {
		id = e.Namespace + "/" + e.Name
	}
	fmt.Fprintf(&b, "%s %-8s %s %s rv=%s", e.Time, e.Type, e.Kind, id, e.ResourceVersion)
	for _, f := range e.fields {
		v := f.Value
		if v == "" {
			v = "<none>"
		}
		fmt.Fprintf(&b, " %s=%s", f.Key, v)
	}
	return b.String()
}

// NewEvent builds the event for an object.
func NewEvent(now time.Time, typ string, t Target, obj *unstructured.Unstructured) *Event {
	e := &Event{
		Time:            now.UTC().Format(TimeFormat),
		Type:            typ,
		Kind:            t.Kind,
		APIVersion:      t.GVR.GroupVersion().String(),
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		ResourceVersion: obj.GetResourceVersion(),
		fields:          Summarize(t.GVR.Group, t.Kind, obj),
	}
	if len(e.fields) > 0 {
		e.Summary = make(map[string]string, len(e.fields))
		for _, f := range e.fields {
			e.Summary[f.Key] = f.Value
		}
	}
	return e
}

// Run resolves the resources, starts one informer per resource and
// namespace, and prints events until ctx is done; it returns nil then.
// Existing objects are printed first as ADDED. Updates that do not change
// the resourceVersion (relists after a reconnect or 410 Gone) are not
// printed.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	switch o.Output {
	case "":
		o.Output = Text
	case Text, JSON:
	default:
		return fmt.Errorf("unknown output format %q: use text or json", o.Output)
	}
	if _, err := labels.Parse(o.LabelSelector); err != nil {
		return fmt.Errorf("invalid label selector %q: %v", o.LabelSelector, err)
	}
	if _, err := fields.ParseSelector(o.FieldSelector); err != nil {
		return fmt.Errorf("invalid field selector %q: %v", o.FieldSelector, err)
	}
	args := o.Resources
	if len(args) == 0 {
		args = DefaultResources
	}

	groups, err := discover(ctx, cfg)
	if err != nil {
		return kubeclient.Explain(cfg.Host, err)
	}
	mapper := shortNames{RESTMapper: newMapper(groups), groups: groups, warn: func(w string) { o.Log.Warn(w) }}
	targets, err := Resolve(mapper, args)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p := &printer{out: o.Out, json: o.Output == JSON}
	tweak := func(lo *metav1.ListOptions) {
		lo.LabelSelector = o.LabelSelector
		lo.FieldSelector = o.FieldSelector
	}
	informers := kubeapi.Informers{Transform: dropManagedFields}
	var synced atomic.Bool
	var registrations []cache.ResourceEventHandlerRegistration
	var watching []string
	for _, t := range targets {
		scopes := []string{metav1.NamespaceAll}
		if t.Namespaced && len(o.Namespaces) > 0 {
			scopes = o.Namespaces
		}
		for _, ns := range scopes {
			inf, err := informers.Add(kubeapi.NewInformer(client.Resource(t.GVR).Namespace(ns), &unstructured.Unstructured{}, tweak,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))
			if err != nil {
				return err
			}
			where := describeScope(t, ns)
			watching = append(watching, where)
			if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				if fatal(err) && !synced.Load() {
					if apierrors.IsMethodNotSupported(err) {
						cancel(fmt.Errorf("%s cannot be watched: the API server does not support listing and watching it", where))
					} else {
						cancel(fmt.Errorf("watching %s: %w", where, kubeclient.Explain(cfg.Host, err)))
					}
					return
				}
				if !errors.Is(err, io.EOF) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					o.Log.Warn("watch interrupted, retrying", "resource", where, "err", err)
				}
			}); err != nil {
				return err
			}
			reg, err := inf.AddEventHandler(handler(t, p))
			if err != nil {
				return err
			}
			registrations = append(registrations, reg)
		}
	}
	informers.Start(ctx.Done())
	syncs := make([]cache.DoneChecker, len(registrations))
	for i, r := range registrations {
		syncs[i] = r.HasSyncedChecker()
	}
	ok := cache.WaitFor(ctx, "", syncs...)
	if ok {
		synced.Store(true)
		o.Log.Info("watching", "resources", watching, "labelSelector", o.LabelSelector, "fieldSelector", o.FieldSelector)
	}
	<-ctx.Done()
	cancel(nil)
	informers.Shutdown()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := p.error(); err != nil {
		return fmt.Errorf("writing events: %w", err)
	}
	return nil
}

// fatal reports errors that retrying will not fix.
func fatal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

func describeScope(t Target, ns string) string {
	name := t.GVR.Resource
	if t.GVR.Group != "" {
		name += "." + t.GVR.Group
	}
	switch {
	case !t.Namespaced:
		return name
	case ns == metav1.NamespaceAll:
		return name + " in all namespaces"
	default:
		return name + " in namespace " + ns
	}
}

func handler(t Target, p *printer) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				p.print(NewEvent(time.Now(), "ADDED", t, u))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
				return // a relist or resync: nothing changed
			}
			p.print(NewEvent(time.Now(), "MODIFIED", t, n))
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
				if obj == nil {
					// Only the key is known.
					ns, name, _ := cache.SplitMetaNamespaceKey(d.Key)
					u := &unstructured.Unstructured{}
					u.SetNamespace(ns)
					u.SetName(name)
					obj = u
				}
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				p.print(NewEvent(time.Now(), "DELETED", t, u))
			}
		},
	}
}

// dropManagedFields is the informers' transform: managed fields are large
// and never printed.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// printer serialises output from the informers' goroutines.
type printer struct {
	mu   sync.Mutex // guards out and err
	out  io.Writer
	json bool
	err  error
}

func (p *printer) print(e *Event) {
	var line []byte
	if p.json {
		b, err := json.Marshal(e)
		if err != nil {
			return
		}
		line = append(b, '\n')
	} else {
		line = []byte(e.Text() + "\n")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		_, p.err = p.out.Write(line)
	}
}

func (p *printer) error() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
