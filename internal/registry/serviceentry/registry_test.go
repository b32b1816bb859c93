package serviceentry

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// memStore is a crd.Store in memory: the test writes it and its events
// run on the writing goroutine.
type memStore struct {
	mu        sync.RWMutex // guards entries and workloads: Run reads them on its own goroutine
	entries   map[string]*networkingv1.ServiceEntry
	workloads map[string]*networkingv1.WorkloadEntry
	handlers  []crd.EventHandler
}

func newMemStore() *memStore {
	return &memStore{entries: map[string]*networkingv1.ServiceEntry{}, workloads: map[string]*networkingv1.WorkloadEntry{}}
}

func (m *memStore) AppendEventHandler(h crd.EventHandler) { m.handlers = append(m.handlers, h) }

func (m *memStore) emit(kind crd.Kind, ns, name string) {
	for _, h := range m.handlers {
		h(crd.Event{Kind: kind, Namespace: ns, Name: name})
	}
}

func (m *memStore) putSE(se *networkingv1.ServiceEntry) {
	m.mu.Lock()
	m.entries[se.Namespace+"/"+se.Name] = se
	m.mu.Unlock()
	m.emit(crd.ServiceEntry, se.Namespace, se.Name)
}

func (m *memStore) deleteSE(ns, name string) {
	m.mu.Lock()
	delete(m.entries, ns+"/"+name)
	m.mu.Unlock()
	m.emit(crd.ServiceEntry, ns, name)
}

func (m *memStore) putWE(we *networkingv1.WorkloadEntry) {
	m.mu.Lock()
	m.workloads[we.Namespace+"/"+we.Name] = we
	m.mu.Unlock()
	m.emit(crd.WorkloadEntry, we.Namespace, we.Name)
}

func (m *memStore) deleteWE(ns, name string) {
	m.mu.Lock()
	delete(m.workloads, ns+"/"+name)
	m.mu.Unlock()
	m.emit(crd.WorkloadEntry, ns, name)
}

func sorted[T any](in map[string]*T) []*T {
	var out []*T
	for _, k := range slices.Sorted(maps.Keys(in)) {
		out = append(out, in[k])
	}
	return out
}

func (m *memStore) ServiceEntries() []*networkingv1.ServiceEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sorted(m.entries)
}

func (m *memStore) WorkloadEntries() []*networkingv1.WorkloadEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sorted(m.workloads)
}

func (m *memStore) ServiceEntry(ns, name string) *networkingv1.ServiceEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.entries[ns+"/"+name]
}

func (m *memStore) WorkloadEntry(ns, name string) *networkingv1.WorkloadEntry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.workloads[ns+"/"+name]
}

func (m *memStore) DestinationRules() []*networkingv1.DestinationRule { return nil }
func (m *memStore) VirtualServices() []*networkingv1.VirtualService   { return nil }
func (m *memStore) DestinationRule(string, string) *networkingv1.DestinationRule {
	return nil
}
func (m *memStore) VirtualService(string, string) *networkingv1.VirtualService { return nil }

var _ crd.Store = (*memStore)(nil)

// events keeps a registry's events.
type events struct {
	mu  sync.Mutex
	got []model.Event
}

func (e *events) add(ev model.Event) { e.mu.Lock(); e.got = append(e.got, ev); e.mu.Unlock() }

// take returns the events since the last take, as "kind host", sorted.
func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.got {
		out = append(out, ev.Kind.String()+" "+string(ev.Hostname))
	}
	e.got = nil
	slices.Sort(out)
	return out
}

func addrs(eps []*model.Endpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.Address+":"+strconv.Itoa(int(ep.Port)))
	}
	return out
}

func newRegistry(t *testing.T, kube *model.Store) (*memStore, *Registry, *events, *configstatus.Reporter) {
	t.Helper()
	store, rep := newMemStore(), configstatus.NewReporter()
	opts := Options{Reporter: rep}
	if kube != nil {
		opts.Services = kube
	}
	r := New(store, opts)
	ev := &events{}
	r.AppendEventHandler(ev.add)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return store, r, ev, rep
}

func refusedAt(rep *configstatus.Reporter, kind crd.Kind, name string) string {
	st, _ := rep.Get(configstatus.Ref{Kind: string(kind), Namespace: "ns", Name: name})
	if st.Refused == nil {
		return ""
	}
	return st.Refused.Path
}

const grpcPort = "ports: [{number: 80, protocol: GRPC, name: grpc, targetPort: 8080}]\n"

func TestServiceEntriesAndTheirWorkloadEntries(t *testing.T) {
	store, r, ev, rep := newRegistry(t, nil)
	const a = model.Hostname("a.example.com")

	store.putSE(serviceEntry(t, "a", "hosts: [a.example.com]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\n"+grpcPort))
	if got := ev.take(); !slices.Equal(got, []string{"ServiceChanged a.example.com"}) {
		t.Fatalf("events %v", got)
	}
	store.putWE(workloadEntry(t, "vm1", "address: 10.0.0.1\nlabels: {app: a}\nports: {grpc: 9000}"))
	store.putWE(workloadEntry(t, "vm2", "address: 10.0.0.2\nlabels: {app: a}"))
	store.putWE(workloadEntry(t, "other", "address: 10.0.0.3\nlabels: {app: b}"))
	store.putWE(workloadEntry(t, "named", "address: vm.example.com\nlabels: {app: a}"))
	if got := addrs(r.Endpoints(a, 80, nil)); !slices.Equal(got, []string{"10.0.0.1:9000", "10.0.0.2:8080"}) {
		t.Fatalf("endpoints %v: want the selected WorkloadEntries with an IP, on their port else the target port", got)
	}
	if got := ev.take(); !slices.Equal(got, []string{"EndpointsChanged a.example.com", "EndpointsChanged a.example.com"}) {
		t.Fatalf("events %v: want one endpoints change per selected WorkloadEntry, none for the others", got)
	}

	// A WorkloadEntry without address is refused; its last good version
	// serves on.
	store.putWE(workloadEntry(t, "vm2", "labels: {app: a}"))
	if got := refusedAt(rep, crd.WorkloadEntry, "vm2"); got != "spec.address" {
		t.Fatalf("vm2 refused at %q", got)
	}
	if got := addrs(r.Endpoints(a, 80, nil)); !slices.Equal(got, []string{"10.0.0.1:9000", "10.0.0.2:8080"}) {
		t.Fatalf("endpoints %v after a refused change", got)
	}
	store.deleteWE("ns", "vm2")
	if got := addrs(r.Endpoints(a, 80, nil)); !slices.Equal(got, []string{"10.0.0.1:9000"}) {
		t.Fatalf("endpoints %v after a delete", got)
	}
	if _, ok := rep.Get(configstatus.Ref{Kind: "WorkloadEntry", Namespace: "ns", Name: "vm2"}); ok {
		t.Fatal("a deleted WorkloadEntry keeps a status")
	}
	ev.take()

	// A refused ServiceEntry keeps its last good version.
	store.putSE(serviceEntry(t, "a", "hosts: [a.example.com]\nresolution: STATIC\nports: [{number: 80, protocol: GRPC}]"))
	if got := refusedAt(rep, crd.ServiceEntry, "a"); got != "spec.ports[0].name" {
		t.Fatalf("a refused at %q", got)
	}
	if r.GetService(a) == nil || len(ev.take()) != 0 {
		t.Fatal("a refused change reached the model")
	}

	// Of two entries of a namespace for one host, the later by name is
	// refused; when the earlier goes, it is served.
	store.putSE(serviceEntry(t, "b", "hosts: [a.example.com, b.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.1.1}]\n"+grpcPort))
	if got := refusedAt(rep, crd.ServiceEntry, "b"); got != "spec.hosts[0]" {
		t.Fatalf("b refused at %q", got)
	}
	if r.GetService("b.example.com") != nil {
		t.Fatal("a refused entry's other host is served")
	}
	store.deleteSE("ns", "a")
	if got := refusedAt(rep, crd.ServiceEntry, "b"); got != "" {
		t.Fatalf("b still refused at %q", got)
	}
	if got := addrs(r.Endpoints(a, 80, nil)); !slices.Equal(got, []string{"10.0.1.1:8080"}) {
		t.Fatalf("endpoints %v: want b's", got)
	}
	// a.example.com is defined alike by both: only its endpoints change.
	if got := ev.take(); !slices.Equal(got, []string{"EndpointsChanged a.example.com", "ServiceChanged b.example.com"}) {
		t.Fatalf("events %v", got)
	}
	store.deleteSE("ns", "b")
	if got := ev.take(); !slices.Equal(got, []string{"ServiceDeleted a.example.com", "ServiceDeleted b.example.com"}) {
		t.Fatalf("events %v", got)
	}
}

// TestAServiceEntryChangeTouchesItsHostsAlone: the model reports only the
// services whose content changed.
func TestAServiceEntryChangeTouchesItsHostsAlone(t *testing.T) {
	store, _, ev, _ := newRegistry(t, nil)
	store.putSE(serviceEntry(t, "a", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1}]\n"+grpcPort))
	store.putSE(serviceEntry(t, "b", "hosts: [b.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.2}]\n"+grpcPort))
	ev.take()
	store.putSE(serviceEntry(t, "b", "hosts: [b.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.3}]\n"+grpcPort))
	if got := ev.take(); !slices.Equal(got, []string{"EndpointsChanged b.example.com"}) {
		t.Fatalf("events %v", got)
	}
	store.putSE(serviceEntry(t, "b", "hosts: [b.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.3}]\nports: [{number: 81, protocol: GRPC, name: grpc}]"))
	if got := ev.take(); !slices.Equal(got, []string{"ServiceChanged b.example.com"}) {
		t.Fatalf("events %v", got)
	}
}

// TestWorkloadEntriesOfAKubernetesService: a Kubernetes Service's selector
// picks WorkloadEntries of its namespace; the registry holds their
// endpoints for the service without defining it.
func TestWorkloadEntriesOfAKubernetesService(t *testing.T) {
	kube := model.NewStore()
	host := model.ServiceHostname("api", "ns", "")
	kubeSvc := func(selector model.Labels, ports ...model.Port) *model.Service {
		return &model.Service{Hostname: host, Name: "api", Namespace: "ns", Ports: ports, Selector: selector}
	}
	kube.Update(kubeSvc(model.Labels{"app": "api"}, model.Port{Name: "grpc", Port: 80, TargetPort: 8080, Protocol: model.GRPC}), nil)
	store, r, ev, _ := newRegistry(t, kube)

	store.putWE(workloadEntry(t, "vm1", "address: 10.0.0.1\nlabels: {app: api}"))
	store.putWE(workloadEntry(t, "vm2", "address: 10.0.0.2\nlabels: {app: api}\nports: {grpc: 9000}"))
	store.putWE(workloadEntry(t, "other", "address: 10.0.0.3\nlabels: {app: other}"))
	if r.GetService(host) != nil || len(r.Services()) != 0 {
		t.Fatal("the registry defines the Kubernetes Service")
	}
	if got := addrs(r.EndpointsByPortName(host, "grpc", nil)); !slices.Equal(got, []string{"10.0.0.1:8080", "10.0.0.2:9000"}) {
		t.Fatalf("endpoints %v: want the selected WorkloadEntries on their port of the service port's name, else the target port", got)
	}
	ev.take()

	// The Service's selector changes: the WorkloadEntries it selects do.
	kube.Update(kubeSvc(model.Labels{"app": "other"}, model.Port{Name: "grpc", Port: 80, TargetPort: 8080, Protocol: model.GRPC}), nil)
	if got := addrs(r.EndpointsByPortName(host, "grpc", nil)); !slices.Equal(got, []string{"10.0.0.3:8080"}) {
		t.Fatalf("endpoints %v after the selector changed", got)
	}
	// A named target port is looked up in the WorkloadEntry's ports by
	// that name alone, as istiod does: vm2 has only a port of the
	// service port's name, and no endpoint.
	kube.Update(kubeSvc(model.Labels{"app": "api"}, model.Port{Name: "grpc", Port: 80, TargetPortName: "serving", Protocol: model.GRPC}), nil)
	store.putWE(workloadEntry(t, "vm1", "address: 10.0.0.1\nlabels: {app: api}\nports: {serving: 7000}"))
	if got := addrs(r.EndpointsByPortName(host, "grpc", nil)); !slices.Equal(got, []string{"10.0.0.1:7000"}) {
		t.Fatalf("endpoints %v with a named target port", got)
	}
	kube.Delete(host)
	if got := r.EndpointsByPortName(host, "grpc", nil); got != nil {
		t.Fatalf("endpoints %v after the Service went", addrs(got))
	}
	if got := ev.take(); len(got) == 0 || got[len(got)-1] != "ServiceDeleted "+string(host) {
		t.Fatalf("events %v", got)
	}
}

// fakePods are a namespace's Pods that the test sets.
type fakePods struct {
	mu       sync.Mutex // guards pods
	pods     []*model.Workload
	handlers []func(string)
}

func (p *fakePods) WorkloadsIn(ns string) []*model.Workload {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*model.Workload
	for _, w := range p.pods {
		if w.Namespace == ns {
			out = append(out, w)
		}
	}
	return out
}

func (p *fakePods) AppendWorkloadHandler(h func(string)) { p.handlers = append(p.handlers, h) }

func (p *fakePods) set(pods ...*model.Workload) {
	p.mu.Lock()
	p.pods = pods
	p.mu.Unlock()
	for _, h := range p.handlers {
		h("ns")
	}
}

// TestAWorkloadSelectorSelectsPods: the Pods of the entry's namespace that
// match its workloadSelector are endpoints, on the target port, and follow
// the Pods' changes.
func TestAWorkloadSelectorSelectsPods(t *testing.T) {
	pods := &fakePods{}
	store := newMemStore()
	r := New(store, Options{Pods: pods})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	store.putSE(serviceEntry(t, "a", "hosts: [a.example.com]\nresolution: STATIC\nworkloadSelector: {labels: {app: a}}\n"+grpcPort))
	store.putWE(workloadEntry(t, "vm", "address: 10.0.0.1\nlabels: {app: a}"))
	pod := func(name, ip, app string) *model.Workload {
		return &model.Workload{Name: name, Namespace: "ns", Addresses: []string{ip}, Labels: map[string]string{"app": app}}
	}
	pods.set(pod("p1", "10.1.0.1", "a"), pod("p2", "10.1.0.2", "b"))
	await := func(want ...string) {
		t.Helper()
		testenv.Eventually(t, "endpoints "+strings.Join(want, ","), func() (bool, string) {
			got := addrs(r.Endpoints("a.example.com", 80, nil))
			return slices.Equal(got, want), strings.Join(got, ",")
		})
	}
	await("10.0.0.1:8080", "10.1.0.1:8080")
	pods.set(pod("p1", "10.1.0.1", "b"), pod("p2", "10.1.0.2", "a"))
	await("10.0.0.1:8080", "10.1.0.2:8080")
	if ep := r.Endpoints("a.example.com", 80, nil)[1]; ep.PodName != "p2" {
		t.Fatalf("pod endpoint %+v has no pod name", ep)
	}
}

// TestAHostOfTwoNamespaces: one definition of a host is served, the first
// namespace's; the other entry is applied but its host is reported as not
// served, and it takes over when the first goes.
// A host that ServiceEntries of two namespaces define keeps both
// definitions, each with its own endpoints, the oldest first, and each
// namespace's clients get their own, as istiod gives them.
func TestAHostOfTwoNamespaces(t *testing.T) {
	store, r, ev, rep := newRegistry(t, nil)
	se := func(ns, ip string, created time.Time) *networkingv1.ServiceEntry {
		e := serviceEntry(t, "a", "hosts: [a.example.com]\nexportTo: [.]\nresolution: STATIC\nendpoints: [{address: "+ip+"}]\n"+grpcPort)
		e.Namespace = ns
		e.CreationTimestamp = metav1.NewTime(created)
		return e
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store.putSE(se("team-b", "10.0.0.2", t0))
	store.putSE(se("team-a", "10.0.0.1", t0.Add(time.Hour)))
	ev.take()
	own := func(svc *model.Service) []string {
		t.Helper()
		if svc == nil {
			return nil
		}
		if eps, ok := svc.OwnEndpoints(); ok {
			return addrs(eps)
		}
		return addrs(r.Endpoints(svc.Hostname, 80, nil))
	}
	check := func(when string, first string, want map[string][]string) {
		t.Helper()
		svc := r.GetService("a.example.com")
		if svc == nil || svc.Namespace != first {
			t.Fatalf("%s: first definition %+v, want team %s's (the oldest)", when, svc, first)
		}
		for ns, w := range want {
			if got := own(svc.ForNamespace(ns)); !slices.Equal(got, w) {
				t.Errorf("%s: a client of %s gets %v, want %v", when, ns, got, w)
			}
		}
	}
	check("both", "team-b", map[string][]string{"team-a": {"10.0.0.1:8080"}, "team-b": {"10.0.0.2:8080"}, "other": nil})
	for _, ns := range []string{"team-a", "team-b"} {
		if st, _ := rep.Get(configstatus.Ref{Kind: "ServiceEntry", Namespace: ns, Name: "a"}); !st.OK() {
			t.Fatalf("%s's status %+v: both definitions are served", ns, st)
		}
	}

	// A change of the second definition's endpoints is a change of the
	// host's service.
	store.putSE(se("team-a", "10.0.0.3", t0.Add(time.Hour)))
	if got := ev.take(); !slices.Contains(got, "ServiceChanged a.example.com") {
		t.Fatalf("events %v: want the host's service changed", got)
	}
	check("after team-a's change", "team-b", map[string][]string{"team-a": {"10.0.0.3:8080"}, "team-b": {"10.0.0.2:8080"}})

	store.deleteSE("team-b", "a")
	check("team-b's gone", "team-a", map[string][]string{"team-a": {"10.0.0.3:8080"}, "team-b": nil})
	if svc := r.GetService("a.example.com"); len(svc.Others) != 0 {
		t.Fatalf("others %+v after team-b's definition went", svc.Others)
	}
}
