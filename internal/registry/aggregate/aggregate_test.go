package aggregate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

const host = model.Hostname("api.ns.svc.cluster.local")

func service(name string, ports ...model.Port) *model.Service {
	return &model.Service{Hostname: model.Hostname(name + ".ns.svc.cluster.local"), Name: name, Namespace: "ns", Ports: ports}
}

func endpoint(addr, portName string, labels map[string]string) *model.Endpoint {
	return &model.Endpoint{Address: addr, Port: 9000, ServicePortName: portName, Labels: labels}
}

var (
	grpc8080 = model.Port{Name: "grpc", Port: 8080, Protocol: model.GRPC}
	grpc9090 = model.Port{Name: "grpc", Port: 9090, Protocol: model.GRPC}
	http8080 = model.Port{Name: "http", Port: 8080, Protocol: model.HTTP}
	dnsUDP   = model.Port{Name: "dns", Port: 53, Protocol: model.UDP}
	dnsTCP   = model.Port{Name: "dns-tcp", Port: 53, Protocol: model.TCP}
)

// update is one service of a source, with its endpoints.
type update struct {
	svc *model.Service
	eps []*model.Endpoint
}

// newAggregate builds an aggregate over one model.Store per source, named
// "s0", "s1"... in order.
func newAggregate(t testing.TB, sources ...[]update) (*Controller, []*model.Store) {
	t.Helper()
	var srcs []Source
	var stores []*model.Store
	for i, ups := range sources {
		st := model.NewStore()
		for _, u := range ups {
			st.Update(u.svc, u.eps)
		}
		stores = append(stores, st)
		srcs = append(srcs, Source{Name: fmt.Sprintf("s%d", i), Controller: st})
	}
	a, err := New(Options{Sources: srcs})
	if err != nil {
		t.Fatal(err)
	}
	return a, stores
}

// addresses lists endpoints as "address/health".
func addresses(eps []*model.Endpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.Address+"/"+ep.Health.String())
	}
	return out
}

func TestMergeRules(t *testing.T) {
	draining := func(ep *model.Endpoint) *model.Endpoint { ep.Health = model.Draining; return ep }
	tests := []struct {
		name    string
		sources [][]update
		// wantDef is the index of the source whose definition is served;
		// -1: none.
		wantDef int
		// lookups: what Endpoints (port number) or EndpointsByPortName
		// (port name) returns.
		byNumber map[int32][]string
		byName   map[string][]string
		selector model.Labels
	}{
		{
			name:     "only the second source defines it",
			sources:  [][]update{nil, {{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.2", "grpc", nil)}}}},
			wantDef:  1,
			byNumber: map[int32][]string{8080: {"10.0.0.2/HEALTHY"}},
		},
		{
			name: "the first source's definition, every source's endpoints for the port's name",
			sources: [][]update{
				{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.3", "grpc", nil)}}},
				{{service("api", grpc9090), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil), endpoint("10.0.0.2", "grpc", nil)}}},
			},
			wantDef: 0,
			// Sorted by address across sources; 9090 is the second
			// source's number for the port, not served.
			byNumber: map[int32][]string{8080: {"10.0.0.1/HEALTHY", "10.0.0.2/HEALTHY", "10.0.0.3/HEALTHY"}, 9090: nil},
			byName:   map[string][]string{"grpc": {"10.0.0.1/HEALTHY", "10.0.0.2/HEALTHY", "10.0.0.3/HEALTHY"}},
		},
		{
			name: "an address listed by both counts once, the first source's copy",
			sources: [][]update{
				{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}},
				{{service("api", grpc8080), []*model.Endpoint{draining(endpoint("10.0.0.1", "grpc", nil)), draining(endpoint("10.0.0.2", "grpc", nil))}}},
			},
			wantDef:  0,
			byNumber: map[int32][]string{8080: {"10.0.0.1/HEALTHY", "10.0.0.2/DRAINING"}},
		},
		{
			name: "a source naming the port differently adds nothing to it",
			sources: [][]update{
				{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}},
				{{service("api", http8080), []*model.Endpoint{endpoint("10.0.0.2", "http", nil)}}},
			},
			wantDef:  0,
			byNumber: map[int32][]string{8080: {"10.0.0.1/HEALTHY"}},
			byName:   map[string][]string{"grpc": {"10.0.0.1/HEALTHY"}, "http": nil},
		},
		{
			name: "kube-dns: 53 means the TCP port, the UDP port is reached by name, both merged by name",
			sources: [][]update{
				{{service("api", dnsUDP, dnsTCP), []*model.Endpoint{endpoint("10.0.0.1", "dns", nil), endpoint("10.0.0.1", "dns-tcp", nil)}}},
				{{service("api", dnsUDP, dnsTCP), []*model.Endpoint{endpoint("10.0.0.2", "dns", nil), endpoint("10.0.0.3", "dns-tcp", nil)}}},
			},
			wantDef:  0,
			byNumber: map[int32][]string{53: {"10.0.0.1/HEALTHY", "10.0.0.3/HEALTHY"}},
			byName:   map[string][]string{"dns": {"10.0.0.1/HEALTHY", "10.0.0.2/HEALTHY"}, "dns-tcp": {"10.0.0.1/HEALTHY", "10.0.0.3/HEALTHY"}},
		},
		{
			name: "the selector applies to every source",
			sources: [][]update{
				{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", map[string]string{"v": "1"}), endpoint("10.0.0.2", "grpc", map[string]string{"v": "2"})}}},
				{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.3", "grpc", map[string]string{"v": "1"})}}},
			},
			wantDef:  0,
			selector: model.Labels{"v": "1"},
			byNumber: map[int32][]string{8080: {"10.0.0.1/HEALTHY", "10.0.0.3/HEALTHY"}},
			byName:   map[string][]string{"grpc": {"10.0.0.1/HEALTHY", "10.0.0.3/HEALTHY"}},
		},
		{
			name:     "no source defines it",
			sources:  [][]update{nil, {{service("other", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}}},
			wantDef:  -1,
			byNumber: map[int32][]string{8080: nil},
			byName:   map[string][]string{"grpc": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, stores := newAggregate(t, tt.sources...)
			got := a.GetService(host)
			var want *model.Service
			if tt.wantDef >= 0 {
				want = stores[tt.wantDef].GetService(host)
			}
			if got != want {
				t.Fatalf("GetService = %+v, want source %d's %+v", got, tt.wantDef, want)
			}
			for port, want := range tt.byNumber {
				if got := addresses(a.Endpoints(host, port, tt.selector)); !slices.Equal(got, want) {
					t.Errorf("Endpoints(%d) = %v, want %v", port, got, want)
				}
			}
			for name, want := range tt.byName {
				if got := addresses(a.EndpointsByPortName(host, name, tt.selector)); !slices.Equal(got, want) {
					t.Errorf("EndpointsByPortName(%q) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestServicesOrderedOnceEachWithTheServedDefinition(t *testing.T) {
	a, stores := newAggregate(t,
		[]update{{service("b", grpc8080), nil}, {service("c", grpc8080), nil}},
		[]update{{service("a", grpc8080), nil}, {service("c", grpc9090), nil}},
	)
	got := a.Services()
	want := []*model.Service{
		stores[1].GetService("a.ns.svc.cluster.local"),
		stores[0].GetService("b.ns.svc.cluster.local"),
		stores[0].GetService("c.ns.svc.cluster.local"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Services = %v, want %v", got, want)
	}
	// Counted as served: c's endpoints would be the union, here none.
	if svcs, eps := a.Len(); svcs != 3 || eps != 0 {
		t.Fatalf("Len = %d, %d; want 3, 0", svcs, eps)
	}
}

func TestLenCountsTheServedView(t *testing.T) {
	a, _ := newAggregate(t,
		[]update{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}},
		[]update{
			{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil), endpoint("10.0.0.2", "grpc", nil)}},
			{service("web", http8080), []*model.Endpoint{endpoint("10.0.0.3", "http", nil)}},
		},
	)
	if svcs, eps := a.Len(); svcs != 2 || eps != 3 {
		t.Fatalf("Len = %d, %d; want 2 services, 3 endpoints (10.0.0.1 once)", svcs, eps)
	}
}

func TestASingleSourceIsServedAsItIs(t *testing.T) {
	eps := []*model.Endpoint{endpoint("10.0.0.2", "grpc", nil), endpoint("10.0.0.1", "grpc", nil)}
	a, stores := newAggregate(t, []update{{service("api", grpc8080), eps}})
	st := stores[0]
	if got, want := a.Endpoints(host, 8080, nil), st.Endpoints(host, 8080, nil); &got[0] != &want[0] {
		t.Fatal("Endpoints is a copy of the store's slice")
	}
	if a.GetService(host) != st.GetService(host) || !slices.Equal(a.Services(), st.Services()) {
		t.Fatal("the definitions are not the store's")
	}
	var got, direct []model.Event
	var mu sync.Mutex
	a.AppendEventHandler(func(ev model.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
	st.AppendEventHandler(func(ev model.Event) { direct = append(direct, ev) })
	st.Update(service("api", grpc8080), eps[:1])
	st.Delete(host)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || !slices.Equal(got, direct) {
		t.Fatalf("events = %v, want the store's %v", got, direct)
	}
}

// recorder keeps the events the aggregate emits.
type recorder struct {
	mu     sync.Mutex
	events []model.Event
}

func (r *recorder) add(ev model.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// take returns the events so far without their SameServiceAccounts,
// which TestIdentitiesOfTheUnion checks (takeAll).
func (r *recorder) take() []model.Event {
	out := r.takeAll()
	for i := range out {
		out[i].SameServiceAccounts = false
	}
	return out
}

func (r *recorder) takeAll() []model.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// TestIdentitiesOfTheUnion: an event of the aggregate says the
// identities of the served endpoints stayed the same only when those of
// the source that changed did: the identities of a union change only
// when those of a part do. A shadowed source's deletion changes them
// when it had any.
func TestIdentitiesOfTheUnion(t *testing.T) {
	a, stores := newAggregate(t, nil, nil)
	kube, entries := stores[0], stores[1]
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	as := func(addr, sa string) *model.Endpoint {
		e := endpoint(addr, "grpc", nil)
		e.ServiceAccount = sa
		return e
	}
	kube.Update(service("api", grpc8080), []*model.Endpoint{as("10.0.0.1", "api")})
	entries.Update(service("api"), []*model.Endpoint{as("10.0.0.5", "vm")})
	rec.takeAll()
	for _, st := range []struct {
		name string
		do   func()
		same bool
	}{
		{"kubernetes adds an endpoint of its account",
			func() {
				kube.Update(service("api", grpc8080), []*model.Endpoint{as("10.0.0.1", "api"), as("10.0.0.2", "api")})
			}, true},
		{"the other source moves its workload, same account",
			func() { entries.Update(service("api"), []*model.Endpoint{as("10.0.0.6", "vm")}) }, true},
		{"the other source's workload runs as another account",
			func() { entries.Update(service("api"), []*model.Endpoint{as("10.0.0.6", "vm2")}) }, false},
		{"kubernetes gets a new account",
			func() {
				kube.Update(service("api", grpc8080), []*model.Endpoint{as("10.0.0.1", "api"), as("10.0.0.2", "api2")})
			}, false},
		{"the other source's endpoints go, and their account",
			func() { entries.Delete(host) }, false},
	} {
		st.do()
		got := rec.takeAll()
		if len(got) != 1 || got[0].Kind != model.EndpointsChanged || got[0].SameServiceAccounts != st.same {
			t.Errorf("%s: events %+v, want EndpointsChanged with SameServiceAccounts %v", st.name, got, st.same)
		}
	}
}

func TestEventsSayWhatChangedInTheServedView(t *testing.T) {
	a, stores := newAggregate(t, nil, nil)
	kube, files := stores[0], stores[1] // kube first: its definitions win
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	eps := func(addrs ...string) []*model.Endpoint {
		var out []*model.Endpoint
		for _, addr := range addrs {
			out = append(out, endpoint(addr, "grpc", nil))
		}
		return out
	}
	ev := func(kind model.EventKind, noEndpoints bool) model.Event {
		return model.Event{Kind: kind, Hostname: host, Namespace: "ns", NoEndpoints: noEndpoints}
	}
	steps := []struct {
		name string
		do   func()
		want model.Event
	}{
		{"files defines the service: it is served",
			func() { files.Update(service("api", grpc8080), eps("10.0.0.2")) },
			ev(model.ServiceChanged, false)},
		{"kubernetes defines it too, without endpoints: its definition is served, with files' endpoints",
			func() { kube.Update(service("api", grpc9090), nil) },
			ev(model.ServiceChanged, false)},
		{"files' endpoints change: the union changed",
			func() { files.Update(service("api", grpc8080), eps("10.0.0.2", "10.0.0.3")) },
			ev(model.EndpointsChanged, false)},
		{"files' shadowed definition changes: only the union can have changed",
			func() {
				files.Update(service("api", model.Port{Name: "grpc", Port: 7070, Protocol: model.GRPC}), eps("10.0.0.2", "10.0.0.3"))
			},
			ev(model.EndpointsChanged, false)},
		{"files deletes the service while kubernetes still has it: still served, its endpoints gone",
			func() { files.Delete(host) },
			ev(model.EndpointsChanged, true)},
		{"files defines it again",
			func() { files.Update(service("api", grpc8080), eps("10.0.0.2")) },
			ev(model.EndpointsChanged, false)},
		{"kubernetes deletes it: files' definition is served now",
			func() { kube.Delete(host) },
			ev(model.ServiceChanged, false)},
		{"kubernetes defines it again with its own endpoints",
			func() { kube.Update(service("api", grpc9090), eps("10.0.0.9")) },
			ev(model.ServiceChanged, false)},
		{"files deletes it: kubernetes' endpoints remain",
			func() { files.Delete(host) },
			ev(model.EndpointsChanged, false)},
		{"kubernetes deletes it: gone",
			func() { kube.Delete(host) },
			ev(model.ServiceDeleted, true)},
	}
	for _, st := range steps {
		st.do()
		if got := rec.take(); !slices.Equal(got, []model.Event{st.want}) {
			t.Fatalf("%s: events = %v, want %v", st.name, got, st.want)
		}
	}
}

// TestADefinitionMovesWhenTheServedOneIsDeleted is the case of the
// previous test with the file source first.
func TestADefinitionMovesWhenTheServedOneIsDeleted(t *testing.T) {
	a, stores := newAggregate(t, nil, nil)
	files, kube := stores[0], stores[1]
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	kube.Update(service("api", grpc9090), nil)
	files.Update(service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.2", "grpc", nil)})
	rec.take()
	files.Delete(host)
	want := model.Event{Kind: model.ServiceChanged, Hostname: host, Namespace: "ns", NoEndpoints: true}
	if got := rec.take(); !slices.Equal(got, []model.Event{want}) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if a.GetService(host) != kube.GetService(host) {
		t.Fatal("kubernetes' definition is not served")
	}
}

func TestSyncedWhenEverySourceIs(t *testing.T) {
	s0, s1 := newRemote(false), newRemote(false)
	a, err := New(Options{Sources: []Source{{"s0", s0}, {"s1", s1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		s0, s1, want bool
	}{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, true}} {
		s0.synced.Store(step.s0)
		s1.synced.Store(step.s1)
		if got := a.HasSynced(); got != step.want {
			t.Errorf("synced %v, %v: HasSynced = %v", step.s0, step.s1, got)
		}
	}
}

func newRunSource() *remoteSource { return newRemote(true) }

func TestRunEndsAtTheFirstErrorAndNamesItsSource(t *testing.T) {
	kube, files := newRunSource(), newRunSource()
	a, err := New(Options{Sources: []Source{{"kubernetes", kube}, {"files", files}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	cause := errors.New("the folder cannot be watched")
	files.fail <- cause
	select {
	case err := <-done:
		if !errors.Is(err, cause) || !strings.Contains(err.Error(), `"files"`) {
			t.Fatalf("Run = %v, want the files source's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after a source failed")
	}
	if !kube.stopped.Load() || !files.stopped.Load() {
		t.Fatal("Run returned before every source stopped")
	}
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("a second Run did not fail")
	}
}

func TestRunStopsEverySourceWhenCtxEnds(t *testing.T) {
	kube, files := newRunSource(), newRunSource()
	a, err := New(Options{Sources: []Source{{"kubernetes", kube}, {"files", files}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after ctx ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with ctx")
	}
	if !kube.stopped.Load() || !files.stopped.Load() {
		t.Fatal("Run returned before every source stopped")
	}
}

// workloads is a source that knows some workloads.
type workloads struct {
	*model.Store
	byIP map[string]*model.Workload
}

func (w workloads) WorkloadByIP(ip string) *model.Workload { return w.byIP[ip] }

func TestWorkloadByIPAsksTheSourcesThatKnowWorkloadsInOrder(t *testing.T) {
	first := workloads{model.NewStore(), map[string]*model.Workload{"10.0.0.1": {Name: "a-first"}}}
	second := workloads{model.NewStore(), map[string]*model.Workload{"10.0.0.1": {Name: "a-second"}, "10.0.0.2": {Name: "b"}}}
	a, err := New(Options{Sources: []Source{{"store", model.NewStore()}, {"first", first}, {"second", second}}})
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{"10.0.0.1": "a-first", "10.0.0.2": "b", "10.0.0.3": ""} {
		got := ""
		if w := a.WorkloadByIP(ip); w != nil {
			got = w.Name
		}
		if got != want {
			t.Errorf("WorkloadByIP(%s) = %q, want %q", ip, got, want)
		}
	}
}

func TestNewRefusesBadSources(t *testing.T) {
	st := model.NewStore()
	for _, tt := range []struct {
		name    string
		sources []Source
		want    string
	}{
		{"none", nil, "no source"},
		{"no name", []Source{{"", st}}, "no name"},
		{"same name twice", []Source{{"a", st}, {"a", model.NewStore()}}, `two sources are named "a"`},
		{"no registry", []Source{{"a", nil}}, `source "a" has no registry`},
	} {
		if _, err := New(Options{Sources: tt.sources}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

// TestConcurrentSources writes two sources from several goroutines while
// the aggregate is read, for the race detector, and checks the view that
// results and that every change reached the handler.
func TestConcurrentSources(t *testing.T) {
	a, stores := newAggregate(t, nil, nil)
	var (
		mu   sync.Mutex
		seen = map[model.Hostname]int{}
	)
	a.AppendEventHandler(func(ev model.Event) {
		mu.Lock()
		seen[ev.Hostname]++
		mu.Unlock()
	})
	const services = 50
	var wg sync.WaitGroup
	for i, st := range stores {
		for w := range 2 { // two writers per source, on their own services: a registry serialises updates per service
			wg.Go(func() {
				for n := w; n < services; n += 2 {
					svc := service(fmt.Sprintf("svc-%d", n), grpc8080)
					st.Update(svc, []*model.Endpoint{endpoint(fmt.Sprintf("10.%d.0.%d", i, n), "grpc", nil)})
				}
			})
		}
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, svc := range a.Services() {
				a.Endpoints(svc.Hostname, 8080, nil)
			}
			a.Len()
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()

	if got := len(a.Services()); got != services {
		t.Fatalf("%d services, want %d", got, services)
	}
	for n := range services {
		h := model.Hostname(fmt.Sprintf("svc-%d.ns.svc.cluster.local", n))
		want := []string{fmt.Sprintf("10.0.0.%d/HEALTHY", n), fmt.Sprintf("10.1.0.%d/HEALTHY", n)}
		if got := addresses(a.Endpoints(h, 8080, nil)); !slices.Equal(got, want) {
			t.Errorf("%s: endpoints %v, want %v", h, got, want)
		}
		mu.Lock()
		if seen[h] != 2 {
			t.Errorf("%s: %d events, want one per source", h, seen[h])
		}
		mu.Unlock()
	}
}

// endpointsOnly is a source that adds endpoints to services it does not
// define (WorkloadEntries selected by a Kubernetes Service): its
// definitions are hidden.
type endpointsOnly struct{ *model.Store }

func (endpointsOnly) Services() []*model.Service               { return nil }
func (endpointsOnly) GetService(model.Hostname) *model.Service { return nil }
func (endpointsOnly) Endpoints(model.Hostname, int32, model.Labels) []*model.Endpoint {
	return nil
}

func TestASourceAddsEndpointsToAServiceItDoesNotDefine(t *testing.T) {
	kube, extra := model.NewStore(), endpointsOnly{model.NewStore()}
	a, err := New(Options{Sources: []Source{{Name: "kubernetes", Controller: kube}, {Name: "workloadentries", Controller: extra}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	ev := func(kind model.EventKind, noEndpoints bool) []model.Event {
		return []model.Event{{Kind: kind, Hostname: host, Namespace: "ns", NoEndpoints: noEndpoints}}
	}

	extra.Update(service("api"), []*model.Endpoint{endpoint("10.0.0.5", "grpc", nil)})
	if got := rec.take(); !slices.Equal(got, ev(model.ServiceDeleted, true)) {
		t.Fatalf("endpoints of a service nobody defines: events = %v", got)
	}
	if a.GetService(host) != nil || len(a.Services()) != 0 || a.EndpointsByPortName(host, "grpc", nil) != nil {
		t.Fatal("a service nobody defines is served")
	}

	kube.Update(service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)})
	if got := rec.take(); !slices.Equal(got, ev(model.ServiceChanged, false)) {
		t.Fatalf("kubernetes defines it: events = %v", got)
	}
	if got := addresses(a.Endpoints(host, 8080, nil)); !slices.Equal(got, []string{"10.0.0.1/HEALTHY", "10.0.0.5/HEALTHY"}) {
		t.Fatalf("endpoints = %v, want kubernetes' and the other source's", got)
	}
	if svcs := a.Services(); len(svcs) != 1 || svcs[0] != kube.GetService(host) {
		t.Fatalf("services = %v, want kubernetes' definition alone", svcs)
	}

	extra.Update(service("api"), []*model.Endpoint{endpoint("10.0.0.6", "grpc", nil)})
	if got := rec.take(); !slices.Equal(got, ev(model.EndpointsChanged, false)) {
		t.Fatalf("its endpoints change: events = %v", got)
	}
	extra.Delete(host)
	if got := rec.take(); !slices.Equal(got, ev(model.EndpointsChanged, false)) {
		t.Fatalf("its endpoints go: events = %v", got)
	}
	if got := addresses(a.Endpoints(host, 8080, nil)); !slices.Equal(got, []string{"10.0.0.1/HEALTHY"}) {
		t.Fatalf("endpoints = %v, want kubernetes' alone", got)
	}
}
