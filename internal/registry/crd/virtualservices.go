package crd

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// RouteOptions configure Routes.
type RouteOptions struct {
	// DomainSuffix resolves short hosts; "cluster.local" when empty.
	DomainSuffix string
	// Policies, when set, are the DestinationRules whose subsets a
	// destination may name (a VirtualService naming another is refused);
	// a change to them checks the VirtualServices naming their hosts
	// again. Nil: every subset is taken as defined.
	Policies *Policies
	// Status, when set, records what became of every VirtualService.
	Status *configstatus.Reporter
	// Mesh, when set, is followed for defaultVirtualServiceExportTo, the
	// exportTo of a VirtualService that says none (routes_mesh.go).
	Mesh MeshSource
	// Services, when set, say which Services exist, for the status of
	// the Gateway API routes (a store that is a GatewayStore); nil takes
	// every Service as existing.
	Services GatewayServices
	// GatewayStatus, when set, takes the status of every Gateway API
	// route attached to a Service; nil writes none.
	GatewayStatus gwstatus.Writer
}

// Routes is the VirtualServices of a Store as generators read them
// (model.RouteIndex): converted (ConvertVirtualService), indexed by host
// and chosen for a client as Istio chooses (model.HostVirtualServices).
// A refused object keeps its last good version in force; of two
// VirtualServices of one namespace that claim one host, the older has it
// (model.HostVirtualServices.Add) and the other is reported refused for
// that host. A change
// is reported, once visible, as a model.ConfigChanged event with the
// VirtualServiceKey of each host the object routed before or routes now.
type Routes struct {
	store Store
	opts  RouteOptions

	handlers modelHandlers

	mu sync.RWMutex // guards the fields below
	// inForce holds each object's last good version, by namespace/name.
	inForce map[string]*model.VirtualService
	// converted holds what each object's conversion reported, by
	// namespace/name, before host conflicts are added.
	converted map[string]configstatus.Status
	// naming holds, per host, the objects in force that name it, by
	// namespace/name: what byHost is built from.
	naming map[model.Hostname]map[string]*model.VirtualService
	// byHost holds, per host, the VirtualServices that route it.
	byHost map[model.Hostname]model.HostVirtualServices
	// subsetUsers lists, per host, the objects that name a subset of it:
	// a change to its DestinationRules checks them again. subsetHosts
	// is the same by object.
	subsetUsers map[model.Hostname]map[string]bool
	subsetHosts map[string][]model.Hostname
	// gw is the Gateway API routes (gatewayroutes.go), merged into
	// VirtualServices that naming and byHost hold beside the others.
	gw gatewayState

	// gwStore is store when it holds the Gateway API routes, else nil;
	// set before store runs.
	gwStore GatewayStore
	// gwUpdate serializes the updates of Gateway API routes (taken
	// before mu).
	gwUpdate sync.Mutex
}

// NewRoutes builds the route view of store; it follows store's events
// (and the rules' of opts.Policies), so call it before store runs.
func NewRoutes(store Store, opts RouteOptions) *Routes {
	r := &Routes{
		store:       store,
		opts:        opts,
		inForce:     map[string]*model.VirtualService{},
		converted:   map[string]configstatus.Status{},
		naming:      map[model.Hostname]map[string]*model.VirtualService{},
		byHost:      map[model.Hostname]model.HostVirtualServices{},
		subsetUsers: map[model.Hostname]map[string]bool{},
		subsetHosts: map[string][]model.Hostname{},
	}
	store.AppendEventHandler(func(ev Event) {
		if ev.Kind == VirtualService {
			r.update(ev.Namespace, ev.Name)
		}
	})
	if opts.Policies != nil {
		opts.Policies.AppendEventHandler(r.onRuleChange)
	}
	if opts.Mesh != nil {
		opts.Mesh.AppendEventHandler(r.onMeshEvent)
	}
	r.watchGateway()
	return r
}

// AppendEventHandler adds a handler of the route events; it may be
// called while the store runs (see modelHandlers).
func (r *Routes) AppendEventHandler(h model.EventHandler) { r.handlers.add(h) }

// onRuleChange checks again the VirtualServices naming a subset of the
// host whose rules changed, or of the hosts a changed wildcard rule
// matches: a subset may have appeared or gone.
func (r *Routes) onRuleChange(ev model.Event) {
	if ev.Config.Kind != model.KindDestinationRule {
		return
	}
	changed := model.Hostname(ev.Config.Name)
	r.mu.RLock()
	var users []string
	for k := range r.subsetUsers[changed] {
		users = append(users, k)
	}
	if strings.HasPrefix(string(changed), "*") {
		// Only a wildcard rule's change looks over every host: a
		// host's own rule concerns the users of that host alone.
		for h, byHost := range r.subsetUsers {
			if h != changed && model.WildcardMatches(changed, h) {
				for k := range byHost {
					users = append(users, k)
				}
			}
		}
	}
	r.mu.RUnlock()
	slices.Sort(users)
	for _, k := range slices.Compact(users) {
		ns, name := splitKey(k)
		r.update(ns, name)
	}
}

// update converts the current state of one object, applies it and
// reports it.
func (r *Routes) update(namespace, name string) {
	key := namespace + "/" + name
	ref := Ref(r.store, VirtualService, namespace, name)
	obj := r.store.VirtualService(namespace, name)
	var (
		now    *model.VirtualService
		status configstatus.Status
	)
	if obj != nil {
		now, status = ConvertVirtualService(obj, ConvertOptions{DomainSuffix: r.opts.DomainSuffix, SubsetDefined: r.subsetDefined()})
		r.defaultExportTo(now)
	}
	hosts, affected := r.set(key, obj, now, status)
	for _, k := range affected {
		r.report(k)
	}
	if obj == nil {
		r.opts.Status.Delete(ref)
	}
	for _, h := range hosts {
		r.handlers.configChanged(model.VirtualServiceKey(h))
	}
}

func (r *Routes) subsetDefined() func(model.Hostname, string) bool {
	if r.opts.Policies == nil {
		return nil
	}
	return r.opts.Policies.SubsetDefined
}

// set records an object's conversion: obj nil is gone, now nil with a
// refusal keeps the last good version. It returns the hosts whose
// VirtualServices changed, and the objects whose status is to be
// reported again (the object, and those it shares a host with).
func (r *Routes) set(key string, obj *networkingv1.VirtualService, now *model.VirtualService, status configstatus.Status) (hosts []model.Hostname, affected []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.subsetHosts[key] {
		delete(r.subsetUsers[h], key)
		if len(r.subsetUsers[h]) == 0 {
			delete(r.subsetUsers, h)
		}
	}
	delete(r.subsetHosts, key)
	if obj == nil {
		delete(r.converted, key)
	} else {
		r.converted[key] = status
		r.subsetHosts[key] = subsetHosts(obj, r.opts.DomainSuffix)
		for _, h := range r.subsetHosts[key] {
			if r.subsetUsers[h] == nil {
				r.subsetUsers[h] = map[string]bool{}
			}
			r.subsetUsers[h][key] = true
		}
	}
	old := r.inForce[key]
	switch {
	case obj == nil || now == nil && status.Refused == nil:
		// Gone, or routes nothing for the mesh.
		delete(r.inForce, key)
	case now != nil && (old == nil || !reflect.DeepEqual(old, now)):
		// An equal conversion (a rule change checked it again) keeps
		// the old one: nothing to push.
		r.inForce[key] = now
	}
	affected = []string{key}
	if old == r.inForce[key] {
		return nil, affected
	}
	if old != nil {
		hosts = append(hosts, old.Hosts...)
		for _, h := range old.Hosts {
			delete(r.naming[h], key)
		}
	}
	if cur := r.inForce[key]; cur != nil {
		hosts = append(hosts, cur.Hosts...)
		for _, h := range cur.Hosts {
			if r.naming[h] == nil {
				r.naming[h] = map[string]*model.VirtualService{}
			}
			r.naming[h][key] = cur
		}
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	for _, h := range hosts {
		for _, vs := range r.reindex(h) {
			affected = append(affected, vs.Namespace+"/"+vs.Name)
		}
	}
	slices.Sort(affected)
	return hosts, slices.Compact(affected)
}

// reindex rebuilds the VirtualServices of one host from naming and
// returns every one that names it (their host conflicts may have
// changed).
func (r *Routes) reindex(h model.Hostname) []*model.VirtualService {
	var all []*model.VirtualService
	var hv model.HostVirtualServices
	for _, vs := range r.naming[h] {
		all = append(all, vs)
		hv.Add(vs)
	}
	if len(hv) == 0 {
		delete(r.byHost, h)
		delete(r.naming, h)
	} else {
		r.byHost[h] = hv
	}
	return all
}

// report records an object's status: its conversion's, refused for a
// host an older VirtualService of its namespace claims.
func (r *Routes) report(key string) {
	r.mu.RLock()
	status, ok := r.converted[key]
	vs := r.inForce[key]
	if ok && status.Refused == nil && vs != nil {
		for i, h := range vs.Hosts {
			if first := r.byHost[h].In(vs.Namespace); first != nil && first != vs {
				status.Refused = &configstatus.Field{
					Path: fmt.Sprintf("spec.hosts[%d]", i),
					Why:  fmt.Sprintf("VirtualService %s/%s, older (creationTimestamp, then name), routes %s: this one does not", first.Namespace, first.Name, h),
				}
				break
			}
		}
	}
	r.mu.RUnlock()
	if !ok {
		return
	}
	ns, name := splitKey(key)
	r.opts.Status.Set(Ref(r.store, VirtualService, ns, name), status)
}

// subsetHosts lists the hosts of whose subsets obj names one.
func subsetHosts(obj *networkingv1.VirtualService, suffix string) []model.Hostname {
	var out []model.Hostname
	for _, route := range obj.Spec.GetHttp() {
		for _, d := range route.GetRoute() {
			if d.GetDestination().GetSubset() == "" {
				continue
			}
			if h, ok := ruleHost(d.GetDestination().GetHost(), obj.Namespace, suffix); ok && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// VirtualServiceFor picks the VirtualService for a client as Istio does
// (model.HostVirtualServices.Choose).
func (r *Routes) VirtualServiceFor(host model.Hostname, clientNamespace string) (*model.VirtualService, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byHost[host].Choose(clientNamespace)
}

var _ model.RouteIndex = (*Routes)(nil)

// splitKey splits a "namespace/name" key.
func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}
