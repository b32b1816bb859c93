package crd

import (
	"slices"
	"sync"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// gwMemStore is a memStore that also holds Gateway API routes and grants.
type gwMemStore struct {
	*memStore
	http   map[string]*gatewayv1.HTTPRoute
	grpc   map[string]*gatewayv1.GRPCRoute
	grants map[string]*gatewayv1beta1.ReferenceGrant
}

func newGWMemStore() *gwMemStore {
	return &gwMemStore{memStore: newMemStore(), http: map[string]*gatewayv1.HTTPRoute{},
		grpc: map[string]*gatewayv1.GRPCRoute{}, grants: map[string]*gatewayv1beta1.ReferenceGrant{}}
}

func values[T any](m map[string]T) []T {
	var out []T
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, m[k])
	}
	return out
}

func (s *gwMemStore) HTTPRoutes() []*gatewayv1.HTTPRoute                { return values(s.http) }
func (s *gwMemStore) GRPCRoutes() []*gatewayv1.GRPCRoute                { return values(s.grpc) }
func (s *gwMemStore) ReferenceGrants() []*gatewayv1beta1.ReferenceGrant { return values(s.grants) }
func (s *gwMemStore) HTTPRoute(ns, name string) *gatewayv1.HTTPRoute    { return s.http[ns+"/"+name] }
func (s *gwMemStore) GRPCRoute(ns, name string) *gatewayv1.GRPCRoute    { return s.grpc[ns+"/"+name] }

func (s *gwMemStore) applyHTTP(r *gatewayv1.HTTPRoute) {
	s.http[r.Namespace+"/"+r.Name] = r
	s.notify(HTTPRoute, r.Namespace, r.Name)
}

func (s *gwMemStore) applyGrant(g *gatewayv1beta1.ReferenceGrant) {
	s.grants[g.Namespace+"/"+g.Name] = g
	s.notify(ReferenceGrant, g.Namespace, g.Name)
}

// recordingWriter is a gwstatus.Writer that keeps what it is given.
type recordingWriter struct {
	mu  sync.Mutex
	set map[string]gwstatus.RouteStatus
}

func (w *recordingWriter) Set(s gwstatus.RouteStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set[s.Kind+"/"+s.Namespace+"/"+s.Name] = s
}

func (w *recordingWriter) Delete(kind, ns, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.set, kind+"/"+ns+"/"+name)
}

// fakeServices are Services by hostname.
type fakeServices struct {
	hosts    map[model.Hostname]bool
	handlers []model.EventHandler
}

func (f *fakeServices) GetService(h model.Hostname) *model.Service {
	if f.hosts[h] {
		return &model.Service{Hostname: h}
	}
	return nil
}
func (f *fakeServices) AppendEventHandler(h model.EventHandler) { f.handlers = append(f.handlers, h) }
func (f *fakeServices) add(h model.Hostname) {
	f.hosts[h] = true
	for _, fn := range f.handlers {
		fn(model.Event{Kind: model.ServiceChanged, Hostname: h})
	}
}

// TestRoutesGatewayAPI: routes from the store reach the index as istiod
// picks them (a consumer route in its namespace only), each change
// pushes the host, a ReferenceGrant and a Service that appears convert
// the routes again, and every route's status reaches the writer and the
// reporter.
func TestRoutesGatewayAPI(t *testing.T) {
	store := newGWMemStore()
	reporter := configstatus.NewReporter()
	writer := &recordingWriter{set: map[string]gwstatus.RouteStatus{}}
	const cart = model.Hostname("cart.shop.svc.cluster.local")
	services := &fakeServices{hosts: map[model.Hostname]bool{cart: true, "v1.shop.svc.cluster.local": true}}
	routes := NewRoutes(store, RouteOptions{Status: reporter, Services: services, GatewayStatus: writer})
	var events []string
	routes.AppendEventHandler(func(ev model.Event) { events = append(events, ev.Config.String()) })
	dests := func(client string) []string {
		vs, _ := routes.VirtualServiceFor(cart, client)
		if vs == nil {
			return nil
		}
		var out []string
		for _, r := range vs.HTTP {
			for _, d := range r.Route {
				out = append(out, string(d.Host))
			}
		}
		return out
	}
	condition := func(key, ty string) string {
		s, ok := writer.set[key]
		if !ok || len(s.Parents) == 0 {
			return "none"
		}
		for _, c := range s.Parents[0].Conditions {
			if c.Type == ty {
				return string(c.Status) + "/" + c.Reason
			}
		}
		return "missing"
	}

	store.applyHTTP(parseHTTPRoute(t, `metadata: {name: producer, namespace: shop, generation: 2}
spec:
  parentRefs: [{group: "", kind: Service, name: cart}]
  rules: [{backendRefs: [{name: v1, port: 80}]}]`))
	if got := dests("web"); !slices.Equal(got, []string{"v1.shop.svc.cluster.local"}) {
		t.Fatalf("web's clients go to %v", got)
	}
	if want := []string{"VirtualService/" + string(cart)}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	if got := condition("HTTPRoute/shop/producer", "Accepted"); got != "True/Accepted" {
		t.Fatalf("Accepted %s", got)
	}
	if writer.set["HTTPRoute/shop/producer"].Generation != 2 {
		t.Fatalf("generation %d", writer.set["HTTPRoute/shop/producer"].Generation)
	}

	// A consumer route of web to a backend of shop: refused without a
	// grant, so the rule answers 500 in web, and other namespaces keep
	// the producer's route.
	store.applyHTTP(parseHTTPRoute(t, `metadata: {name: consumer, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules: [{backendRefs: [{name: canary, namespace: shop, port: 80}]}]`))
	if got := dests("web"); len(got) != 0 {
		t.Fatalf("web's clients go to %v, want a 500", got)
	}
	if got := condition("HTTPRoute/web/consumer", "ResolvedRefs"); got != "False/RefNotPermitted" {
		t.Fatalf("ResolvedRefs %s", got)
	}
	if got := dests("other"); !slices.Equal(got, []string{"v1.shop.svc.cluster.local"}) {
		t.Fatalf("other's clients go to %v", got)
	}
	events = nil
	store.applyGrant(grant("web", "shop", "HTTPRoute"))
	if got := dests("web"); !slices.Equal(got, []string{"canary.shop.svc.cluster.local"}) {
		t.Fatalf("with the grant, web's clients go to %v", got)
	}
	if want := []string{"VirtualService/" + string(cart)}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	if got := condition("HTTPRoute/web/consumer", "ResolvedRefs"); got != "False/BackendNotFound" {
		t.Fatalf("ResolvedRefs %s (canary does not exist yet)", got)
	}
	events = nil
	services.add("canary.shop.svc.cluster.local")
	if got := condition("HTTPRoute/web/consumer", "ResolvedRefs"); got != "True/ResolvedRefs" {
		t.Fatalf("ResolvedRefs %s once canary exists", got)
	}
	if len(events) != 0 {
		t.Fatalf("a status change pushed %v", events)
	}

	// A route with a problem is reported for /debug/configz too.
	if st, ok := reporter.Get(configstatus.Ref{Kind: "HTTPRoute", Namespace: "web", Name: "consumer"}); !ok || !st.OK() {
		t.Fatalf("configz: %+v %v", st, ok)
	}

	// Gone: its status is deleted, web follows the producer's route.
	delete(store.http, "web/consumer")
	store.notify(HTTPRoute, "web", "consumer")
	if _, ok := writer.set["HTTPRoute/web/consumer"]; ok {
		t.Fatalf("the status of a deleted route stays")
	}
	if got := dests("web"); !slices.Equal(got, []string{"v1.shop.svc.cluster.local"}) {
		t.Fatalf("web's clients go to %v", got)
	}
}
