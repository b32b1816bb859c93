package crd

import (
	"reflect"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// GatewayStore is what a Store offers when it holds the Gateway API
// kinds the mesh reads (HTTPRoute, GRPCRoute, ReferenceGrant): a
// cluster's Registry and a folder's IstioStore. Its events are the
// Store's, of the kinds HTTPRoute, GRPCRoute and ReferenceGrant.
type GatewayStore interface {
	Store
	HTTPRoutes() []*gatewayv1.HTTPRoute
	GRPCRoutes() []*gatewayv1.GRPCRoute
	ReferenceGrants() []*gatewayv1beta1.ReferenceGrant

	HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute
	GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute
}

// GatewayServices are the Services routes attach to and route to: whether
// one exists decides a route's status, and a Service that comes or goes
// converts again the routes naming it.
type GatewayServices interface {
	GetService(hostname model.Hostname) *model.Service
	AppendEventHandler(model.EventHandler)
}

// gatewayState is what Routes holds of the Gateway API routes, under
// Routes.mu.
type gatewayState struct {
	// routes are the routes' last good conversions, by gatewayKey.
	routes map[string]*GatewayRoute
	// merged are the VirtualServices the routes merge into, by
	// namespace/name, each in naming and byHost like a VirtualService.
	merged map[string]*model.VirtualService
}

func gatewayKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// watchGateway makes r follow the Gateway API routes of a store that
// holds them, and the Services they name.
func (r *Routes) watchGateway() {
	gs, ok := r.store.(GatewayStore)
	if !ok {
		return
	}
	r.gwStore = gs
	r.gw = gatewayState{routes: map[string]*GatewayRoute{}, merged: map[string]*model.VirtualService{}}
	gs.AppendEventHandler(func(ev Event) {
		switch ev.Kind {
		case HTTPRoute, GRPCRoute:
			r.updateGateway(string(ev.Kind), ev.Namespace, ev.Name)
		case ReferenceGrant:
			// A grant may allow or refuse any route's backends of its
			// namespace: every route converts again, which changes
			// nothing where nothing differs.
			r.updateAllGateway()
		}
	})
	if r.opts.Services != nil {
		r.opts.Services.AppendEventHandler(func(ev model.Event) {
			if ev.Kind != model.ServiceChanged && ev.Kind != model.ServiceDeleted {
				return
			}
			r.mu.RLock()
			var keys []string
			for k, gr := range r.gw.routes {
				if slices.Contains(gr.Services, ev.Hostname) {
					keys = append(keys, k)
				}
			}
			r.mu.RUnlock()
			r.updateGatewayKeys(keys)
		})
	}
}

func (r *Routes) updateAllGateway() {
	r.mu.RLock()
	keys := make([]string, 0, len(r.gw.routes))
	for k := range r.gw.routes {
		keys = append(keys, k)
	}
	r.mu.RUnlock()
	for _, o := range r.gwStore.HTTPRoutes() {
		keys = append(keys, gatewayKey(gwstatus.KindHTTPRoute, o.Namespace, o.Name))
	}
	for _, o := range r.gwStore.GRPCRoutes() {
		keys = append(keys, gatewayKey(gwstatus.KindGRPCRoute, o.Namespace, o.Name))
	}
	r.updateGatewayKeys(keys)
}

func (r *Routes) updateGatewayKeys(keys []string) {
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		kind, rest, _ := strings.Cut(k, "/")
		ns, name := splitKey(rest)
		r.updateGateway(kind, ns, name)
	}
}

// gatewayOptions are the conversion's options now: the grants in force
// and the Services that exist.
func (r *Routes) gatewayOptions() GatewayConvertOptions {
	o := GatewayConvertOptions{DomainSuffix: r.opts.DomainSuffix, Grants: r.gwStore.ReferenceGrants()}
	if s := r.opts.Services; s != nil {
		suffix := o.DomainSuffix
		if suffix == "" {
			suffix = model.DefaultDomainSuffix
		}
		o.ServiceExists = func(ns, name string) bool { return s.GetService(model.ServiceHostname(name, ns, suffix)) != nil }
	}
	return o
}

// updateGateway converts one route's current state, merges the routes
// again, reports the route's status and pushes the hosts whose merged
// routes changed.
func (r *Routes) updateGateway(kind, namespace, name string) {
	// The store's events and the Services' come on different
	// goroutines: one update at a time, so that a conversion that read
	// older Services never replaces a newer one, nor its status.
	r.gwUpdate.Lock()
	defer r.gwUpdate.Unlock()
	var conv *GatewayRoute
	switch kind {
	case gwstatus.KindHTTPRoute:
		if obj := r.gwStore.HTTPRoute(namespace, name); obj != nil {
			conv = ConvertHTTPRoute(obj, r.gatewayOptions())
		}
	case gwstatus.KindGRPCRoute:
		if obj := r.gwStore.GRPCRoute(namespace, name); obj != nil {
			conv = ConvertGRPCRoute(obj, r.gatewayOptions())
		}
	}
	key := gatewayKey(kind, namespace, name)
	ref := Ref(r.store, Kind(kind), namespace, name)
	hosts := r.setGateway(key, conv)
	writer := r.opts.GatewayStatus
	if writer == nil {
		writer = gwstatus.Discard
	}
	switch {
	case conv == nil:
		r.opts.Status.Delete(ref)
		writer.Delete(kind, namespace, name)
	default:
		r.opts.Status.Set(ref, conv.Status)
		if len(conv.RouteStatus.Parents) > 0 {
			writer.Set(conv.RouteStatus)
		} else {
			writer.Delete(kind, namespace, name)
		}
	}
	for _, h := range hosts {
		r.handlers.configChanged(model.VirtualServiceKey(h))
	}
}

// setGateway records a route's conversion (nil: gone; refused: the last
// good one stays), merges every route again and indexes what changed; it
// returns the hosts whose routes changed.
func (r *Routes) setGateway(key string, conv *GatewayRoute) []model.Hostname {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case conv == nil:
		delete(r.gw.routes, key)
	case conv.Status.Refused == nil:
		r.gw.routes[key] = conv
	}
	return r.remergeGateway()
}

// remergeGateway rebuilds the merged VirtualServices and indexes those
// that changed; r.mu is held.
func (r *Routes) remergeGateway() []model.Hostname {
	all := make([]*GatewayRoute, 0, len(r.gw.routes))
	for _, gr := range r.gw.routes {
		all = append(all, gr)
	}
	now := map[string]*model.VirtualService{}
	for _, vs := range MergeGatewayRoutes(all) {
		r.defaultExportTo(vs)
		now[vs.Namespace+"/"+vs.Name] = vs
	}
	var hosts []model.Hostname
	for k, old := range r.gw.merged {
		if cur := now[k]; cur == nil || !reflect.DeepEqual(old, cur) {
			hosts = append(hosts, old.Hosts...)
			for _, h := range old.Hosts {
				delete(r.naming[h], k)
			}
			delete(r.gw.merged, k)
		}
	}
	for k, cur := range now {
		if r.gw.merged[k] != nil {
			continue
		}
		r.gw.merged[k] = cur
		hosts = append(hosts, cur.Hosts...)
		for _, h := range cur.Hosts {
			if r.naming[h] == nil {
				r.naming[h] = map[string]*model.VirtualService{}
			}
			r.naming[h][k] = cur
		}
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	for _, h := range hosts {
		r.reindex(h)
	}
	return hosts
}
