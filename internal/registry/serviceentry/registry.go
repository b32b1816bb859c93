package serviceentry

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// Services is what the registry reads of the Kubernetes Services (of a
// cluster, or of a folder's manifests): their selectors and ports, and
// their changes.
type Services interface {
	model.ServiceDiscovery
	// AppendEventHandler is called once, in New, before the Services
	// run.
	AppendEventHandler(model.EventHandler)
}

// Options configure a Registry.
type Options struct {
	// DomainSuffix is the cluster's domain suffix ("cluster.local" when
	// empty); a ServiceEntry's hosts are taken as written, it only names
	// the Kubernetes Services.
	DomainSuffix string
	// Services, when set, are the Kubernetes Services whose selectors
	// pick WorkloadEntries of their namespace as endpoints, as in Istio.
	Services Services
	// Pods, when set, are the Pods a workloadSelector selects beside the
	// WorkloadEntries.
	Pods Pods
	// Reporter records what became of each object (and logs refusals);
	// nil records nothing.
	Reporter *configstatus.Reporter
}

// Registry is the services of a crd.Store's ServiceEntries, with the
// endpoints their WorkloadEntries give, and the WorkloadEntries that
// Kubernetes Services select. It is a model.Controller, a source of the
// aggregate registry placed after the Kubernetes registry, whose
// definitions win on a shared hostname as in Istio.
//
// Reads are safe for concurrent use. Events come from the Store's
// goroutine and from the Services' goroutines, serialised by mu.
type Registry struct {
	store crd.Store
	opts  Options

	// own holds the services the ServiceEntries define and their
	// endpoints.
	own *model.Store
	// selected holds, per Kubernetes Service, the endpoints of the
	// WorkloadEntries it selects, under a stand-in definition (hostname
	// and namespace) that no read returns: the Kubernetes registry
	// defines the service, this registry only adds endpoints, which the
	// aggregate unions by port name.
	selected *model.Store

	mu sync.Mutex // guards everything below, and serialises writes to own and selected
	// entries and workloads are the objects in force (the last good
	// version of each), by namespace/name.
	entries   map[string]*entry
	workloads map[string]*workload
	// convStatus is each object's conversion status; reported the
	// objects whose status (conversion and rebuild together) the
	// Reporter holds.
	convStatus map[configstatus.Ref]configstatus.Status
	reported   map[configstatus.Ref]bool
	// served are the hostnames in own; foreign those in selected.
	served  map[model.Hostname]bool
	foreign map[model.Hostname]bool

	// podsChanged wakes Run after Pods changed in the namespaces of
	// podNamespaces: Pod events come on informer goroutines, which must
	// not wait for a rebuild.
	podsChanged   chan struct{}
	podMu         sync.Mutex // guards podNamespaces
	podNamespaces map[string]bool
}

// New builds the registry of store's ServiceEntries and WorkloadEntries;
// it follows store's events (and opts.Services'), so call it before they
// run.
func New(store crd.Store, opts Options) *Registry {
	r := &Registry{
		store:      store,
		opts:       opts,
		own:        model.NewStore(),
		selected:   model.NewStore(),
		entries:    map[string]*entry{},
		workloads:  map[string]*workload{},
		convStatus: map[configstatus.Ref]configstatus.Status{},
		reported:   map[configstatus.Ref]bool{},
		served:     map[model.Hostname]bool{},
		foreign:    map[model.Hostname]bool{},
	}
	store.AppendEventHandler(r.onEvent)
	if opts.Pods != nil {
		r.podsChanged, r.podNamespaces = make(chan struct{}, 1), map[string]bool{}
		opts.Pods.AppendWorkloadHandler(r.notePods)
	}
	if opts.Services != nil {
		opts.Services.AppendEventHandler(r.onServiceEvent)
	}
	return r
}

// AppendEventHandler adds a handler of the registry's changes; call it
// before Run.
func (r *Registry) AppendEventHandler(h model.EventHandler) {
	r.own.AppendEventHandler(h)
	r.selected.AppendEventHandler(h)
}

// HasSynced is always true: the Istio kinds do not hold readiness back
// (their CRDs may not be installed); objects that arrive later are
// pushed like any change.
func (r *Registry) HasSynced() bool { return true }

// Run reads every object the store already holds, then follows its
// events until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	r.mu.Lock()
	for _, se := range r.store.ServiceEntries() {
		r.convertEntry(se.Namespace, se.Name)
	}
	for _, we := range r.store.WorkloadEntries() {
		r.convertWorkloadEntry(we.Namespace, we.Name)
	}
	r.rebuild(true)
	r.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.podsChanged:
			r.onPods()
		}
	}
}

func (r *Registry) onEvent(ev crd.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Kind {
	case crd.ServiceEntry:
		r.convertEntry(ev.Namespace, ev.Name)
		r.rebuild(false)
	case crd.WorkloadEntry:
		r.convertWorkloadEntry(ev.Namespace, ev.Name)
		r.rebuild(true)
	}
}

// convertEntry reads one ServiceEntry into entries; a refused one keeps
// its last good version.
func (r *Registry) convertEntry(ns, name string) {
	ref := configstatus.Ref{Kind: string(crd.ServiceEntry), Namespace: ns, Name: name}
	se := r.store.ServiceEntry(ns, name)
	if se == nil {
		delete(r.entries, ns+"/"+name)
		delete(r.convStatus, ref)
		return
	}
	e, st := convertServiceEntry(se, r.opts.DomainSuffix)
	if e != nil {
		r.entries[e.key()] = e
	}
	r.convStatus[ref] = st
}

// convertWorkloadEntry reads one WorkloadEntry into workloads; a refused
// one keeps its last good version.
func (r *Registry) convertWorkloadEntry(ns, name string) {
	ref := configstatus.Ref{Kind: string(crd.WorkloadEntry), Namespace: ns, Name: name}
	we := r.store.WorkloadEntry(ns, name)
	if we == nil {
		delete(r.workloads, ns+"/"+name)
		delete(r.convStatus, ref)
		return
	}
	w, bad := convertWorkload(&we.Spec, ns, "spec")
	if bad == nil {
		r.workloads[ns+"/"+name] = w
	}
	r.convStatus[ref] = configstatus.Status{Refused: bad}
}

// rebuild sets the model from the objects in force, and the endpoints
// WorkloadEntries give Kubernetes Services when workloads changed (a
// ServiceEntry never changes those). The stores report only what really
// changed, so an object's change touches only the services and endpoints
// it affects.
func (r *Registry) rebuild(workloadsChanged bool) {
	st := maps.Clone(r.convStatus)
	byNS := r.workloadsByNamespace()

	// The hosts of each namespace's entries, by name: the earlier entry
	// of a namespace keeps a host, a later one that repeats it is
	// refused. Several namespaces may each define a host: every
	// definition is kept, the oldest first (model.WithDefinitions), and
	// each client gets the one its namespace sees.
	defs := map[model.Hostname][]model.Definition{}
	owner := map[model.Hostname][]*entry{}
	for _, e := range sortedEntries(r.entries) {
		ref := configstatus.Ref{Kind: string(crd.ServiceEntry), Namespace: e.namespace, Name: e.name}
		if clash := r.sameNamespaceClash(e, owner); clash != nil {
			if st[ref].Refused == nil {
				st[ref] = configstatus.Refuse(clash.Path, clash.Why)
			}
			continue
		}
		eps := r.entryEndpoints(e, byNS[e.namespace])
		for _, svc := range e.services {
			owner[svc.Hostname] = append(owner[svc.Hostname], e)
			defs[svc.Hostname] = append(defs[svc.Hostname], model.Definition{Service: svc, Endpoints: eps})
		}
	}
	desired := make(map[model.Hostname]*model.Service, len(defs))
	endpoints := make(map[model.Hostname][]*model.Endpoint, len(defs))
	for h, d := range defs {
		// Entries are visited by namespace then name; the oldest
		// definition comes first, as istiod sorts services by creation
		// time, and the namespace decides between equals.
		order := make([]int, len(d))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return owner[h][a].created.Compare(owner[h][b].created) })
		sorted := make([]model.Definition, len(d))
		for i, j := range order {
			sorted[i] = d[j]
		}
		desired[h] = model.WithDefinitions(sorted[0].Service, sorted[1:])
		endpoints[h] = sorted[0].Endpoints
	}
	for h := range r.served {
		if desired[h] == nil {
			r.own.Delete(h)
			delete(r.served, h)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(desired)) {
		r.own.Update(desired[h], endpoints[h])
		r.served[h] = true
	}
	if workloadsChanged {
		r.rebuildSelected(byNS)
	}
	r.report(st)
}

// sameNamespaceClash returns the host field of e that an earlier entry of
// its namespace already defines, or nil.
func (r *Registry) sameNamespaceClash(e *entry, owner map[model.Hostname][]*entry) *configstatus.Field {
	for i, svc := range e.services {
		if prev := owner[svc.Hostname]; len(prev) > 0 && prev[len(prev)-1].namespace == e.namespace {
			o := prev[len(prev)-1]
			return &configstatus.Field{Path: e.hostPaths[i], Why: "host " + string(svc.Hostname) + " is defined by ServiceEntry " + o.key() + ", earlier by name"}
		}
	}
	return nil
}

// entryEndpoints are an entry's own endpoints and those of the
// WorkloadEntries of its namespace it selects.
func (r *Registry) entryEndpoints(e *entry, workloads []*workload) []*model.Endpoint {
	if !e.selects || len(e.services) == 0 {
		return e.endpoints
	}
	eps := slices.Clip(e.endpoints)
	if r.opts.Pods != nil {
		workloads = append(slices.Clip(workloads), podWorkloads(r.opts.Pods.WorkloadsIn(e.namespace))...)
	}
	for _, w := range workloads {
		// A STATIC entry's endpoints are addresses; a WorkloadEntry
		// holding a name serves only DNS entries.
		if !e.selector.Matches(w.labels) || (e.staticOnly && !w.isIP) {
			continue
		}
		for _, p := range e.services[0].Ports {
			if ep := w.endpoint(p); ep != nil {
				eps = append(eps, ep)
			}
		}
	}
	return eps
}

func (r *Registry) workloadsByNamespace() map[string][]*workload {
	out := map[string][]*workload{}
	for _, k := range slices.Sorted(maps.Keys(r.workloads)) {
		w := r.workloads[k]
		out[w.namespace] = append(out[w.namespace], w)
	}
	return out
}

// report records each object's status (the Reporter logs refusals and
// ignores a status set again unchanged) and forgets the objects that are
// gone.
func (r *Registry) report(st map[configstatus.Ref]configstatus.Status) {
	for ref := range r.reported {
		if _, ok := st[ref]; !ok {
			r.opts.Reporter.Delete(ref)
			delete(r.reported, ref)
		}
	}
	for _, ref := range slices.SortedFunc(maps.Keys(st), compareRef) {
		// With where the object was read, when its store says.
		r.opts.Reporter.Set(crd.Ref(r.store, crd.Kind(ref.Kind), ref.Namespace, ref.Name), st[ref])
		r.reported[ref] = true
	}
}

// Services lists the services the ServiceEntries define, ordered by
// hostname.
func (r *Registry) Services() []*model.Service { return r.own.Services() }

// GetService returns the service a ServiceEntry defines with that
// hostname, or nil: never a Kubernetes Service.
func (r *Registry) GetService(hostname model.Hostname) *model.Service {
	return r.own.GetService(hostname)
}

// Endpoints returns the endpoints of a port of a service this registry
// defines.
func (r *Registry) Endpoints(hostname model.Hostname, port int32, selector model.Labels) []*model.Endpoint {
	return r.own.Endpoints(hostname, port, selector)
}

// EndpointsByPortName returns the endpoints of the port of that name: of
// a service a ServiceEntry defines, else the WorkloadEntries a
// Kubernetes Service of that hostname selects.
func (r *Registry) EndpointsByPortName(hostname model.Hostname, portName string, selector model.Labels) []*model.Endpoint {
	if r.own.GetService(hostname) != nil {
		return r.own.EndpointsByPortName(hostname, portName, selector)
	}
	return r.selected.EndpointsByPortName(hostname, portName, selector)
}

var _ model.Controller = (*Registry)(nil)

func sortedEntries(in map[string]*entry) []*entry {
	out := make([]*entry, 0, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		out = append(out, in[k])
	}
	return out
}

func compareRef(a, b configstatus.Ref) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
