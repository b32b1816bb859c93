package aggregate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// remoteSource is a Store whose sync the test controls, that records its
// Run and fails it when told to: a remote cluster, or any source whose
// running a test follows.
type remoteSource struct {
	*model.Store
	synced  atomic.Bool
	started atomic.Bool
	stopped atomic.Bool
	fail    chan error
}

func newRemote(synced bool, ups ...update) *remoteSource {
	r := &remoteSource{Store: model.NewStore(), fail: make(chan error, 1)}
	r.synced.Store(synced)
	for _, u := range ups {
		r.Update(u.svc, u.eps)
	}
	return r
}

func (r *remoteSource) HasSynced() bool { return r.synced.Load() }

func (r *remoteSource) Run(ctx context.Context) error {
	r.started.Store(true)
	defer r.stopped.Store(true)
	select {
	case <-ctx.Done():
		return nil
	case err := <-r.fail:
		return err
	}
}

// eventually waits for cond (testenv.Eventually, for a condition that
// has no detail to tell).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, func() (bool, string) { return cond(), "not yet" })
}

func eps(addrs ...string) []*model.Endpoint {
	var out []*model.Endpoint
	for _, addr := range addrs {
		out = append(out, endpoint(addr, "grpc", nil))
	}
	return out
}

func ev(kind model.EventKind, noEndpoints bool) model.Event {
	return model.Event{Kind: kind, Hostname: host, Namespace: "ns", NoEndpoints: noEndpoints}
}

// TestAddAndRemoveASource: what a source added last changes in the
// served view, and the events that say so, then the same taken away.
func TestAddAndRemoveASource(t *testing.T) {
	tests := []struct {
		name   string
		local  []update
		remote []update
		// localEndpointsOnly: the local source adds endpoints to hosts it
		// does not define (WorkloadEntries).
		localEndpointsOnly  bool
		wantAdd, wantRemove []model.Event
		// wantEndpoints: Endpoints(host, 8080) once the source is added.
		wantEndpoints []string
	}{
		{
			name:          "only the added source defines the host",
			remote:        []update{{service("api", grpc8080), eps("10.0.1.1")}},
			wantAdd:       []model.Event{ev(model.ServiceChanged, false)},
			wantRemove:    []model.Event{ev(model.ServiceDeleted, true)},
			wantEndpoints: []string{"10.0.1.1/HEALTHY"},
		},
		{
			name:          "both define it: the local definition, endpoints unioned",
			local:         []update{{service("api", grpc8080), eps("10.0.0.1")}},
			remote:        []update{{service("api", grpc9090), eps("10.0.1.1")}},
			wantAdd:       []model.Event{ev(model.EndpointsChanged, false)},
			wantRemove:    []model.Event{ev(model.EndpointsChanged, false)},
			wantEndpoints: []string{"10.0.0.1/HEALTHY", "10.0.1.1/HEALTHY"},
		},
		{
			name:          "the local source has no endpoints: the added one brings the first",
			local:         []update{{service("api", grpc8080), nil}},
			remote:        []update{{service("api", grpc8080), eps("10.0.1.1")}},
			wantAdd:       []model.Event{ev(model.EndpointsChanged, false)},
			wantRemove:    []model.Event{ev(model.EndpointsChanged, true)},
			wantEndpoints: []string{"10.0.1.1/HEALTHY"},
		},
		{
			name:  "a shadowed definition naming the port differently changes nothing served",
			local: []update{{service("api", grpc8080), eps("10.0.0.1")}},
			remote: []update{{service("api", http8080), []*model.Endpoint{
				endpoint("10.0.1.1", "http", nil)}}},
			wantEndpoints: []string{"10.0.0.1/HEALTHY"},
		},
		{
			name:          "an address both list counts once: nothing changes",
			local:         []update{{service("api", grpc8080), eps("10.0.0.1")}},
			remote:        []update{{service("api", grpc8080), eps("10.0.0.1")}},
			wantEndpoints: []string{"10.0.0.1/HEALTHY"},
		},
		{
			name:          "an empty source changes nothing",
			local:         []update{{service("api", grpc8080), eps("10.0.0.1")}},
			wantEndpoints: []string{"10.0.0.1/HEALTHY"},
		},
		{
			name:               "the added source defines a host another only adds endpoints to",
			local:              []update{{service("api"), eps("10.0.0.5")}},
			localEndpointsOnly: true,
			remote:             []update{{service("api", grpc8080), eps("10.0.1.1")}},
			wantAdd:            []model.Event{ev(model.ServiceChanged, false)},
			wantRemove:         []model.Event{ev(model.ServiceDeleted, true)},
			wantEndpoints:      []string{"10.0.0.5/HEALTHY", "10.0.1.1/HEALTHY"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := model.NewStore()
			for _, u := range tt.local {
				st.Update(u.svc, u.eps)
			}
			var local model.Controller = st
			if tt.localEndpointsOnly {
				local = endpointsOnly{st}
			}
			a, err := New(Options{Sources: []Source{{Name: "local", Controller: local}}})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			a.AppendEventHandler(rec.add)
			before := addresses(a.Endpoints(host, 8080, nil))

			if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: newRemote(true, tt.remote...)}); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); !slices.Equal(got, tt.wantAdd) {
				t.Errorf("added: events = %v, want %v", got, tt.wantAdd)
			}
			if got := addresses(a.Endpoints(host, 8080, nil)); !slices.Equal(got, tt.wantEndpoints) {
				t.Errorf("added: endpoints = %v, want %v", got, tt.wantEndpoints)
			}
			if got, want := a.Sources(), []string{"local", "remote"}; !slices.Equal(got, want) {
				t.Errorf("Sources = %v, want %v", got, want)
			}

			if err := a.RemoveSource("remote"); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); !slices.Equal(got, tt.wantRemove) {
				t.Errorf("removed: events = %v, want %v", got, tt.wantRemove)
			}
			if got := addresses(a.Endpoints(host, 8080, nil)); !slices.Equal(got, before) {
				t.Errorf("removed: endpoints = %v, want %v as before", got, before)
			}
		})
	}
}

// TestReplaceEmitsOnlyWhatDiffers: a replacement put in the old source's
// place emits what the served view gained or lost between the two.
func TestReplaceEmitsOnlyWhatDiffers(t *testing.T) {
	draining := func(ep *model.Endpoint) *model.Endpoint { ep.Health = model.Draining; return ep }
	grpc7070 := model.Port{Name: "grpc", Port: 7070, Protocol: model.GRPC}
	tests := []struct {
		name          string
		local         []update
		old, next     []update
		want          []model.Event
		wantEndpoints []string
	}{
		{
			name:          "the same content in new objects: nothing",
			old:           []update{{service("api", grpc8080), eps("10.0.1.1", "10.0.1.2")}},
			next:          []update{{service("api", grpc8080), eps("10.0.1.2", "10.0.1.1")}},
			wantEndpoints: []string{"10.0.1.1/HEALTHY", "10.0.1.2/HEALTHY"},
		},
		{
			name:          "an endpoint more",
			old:           []update{{service("api", grpc8080), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc8080), eps("10.0.1.1", "10.0.1.2")}},
			want:          []model.Event{ev(model.EndpointsChanged, false)},
			wantEndpoints: []string{"10.0.1.1/HEALTHY", "10.0.1.2/HEALTHY"},
		},
		{
			name:          "an endpoint's health",
			old:           []update{{service("api", grpc8080), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc8080), []*model.Endpoint{draining(endpoint("10.0.1.1", "grpc", nil))}}},
			want:          []model.Event{ev(model.EndpointsChanged, false)},
			wantEndpoints: []string{"10.0.1.1/DRAINING"},
		},
		{
			name:          "the served definition",
			old:           []update{{service("api", grpc7070), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc8080), eps("10.0.1.1")}},
			want:          []model.Event{ev(model.ServiceChanged, false)},
			wantEndpoints: []string{"10.0.1.1/HEALTHY"},
		},
		{
			name:          "a shadowed definition, same endpoints: nothing",
			local:         []update{{service("api", grpc8080), eps("10.0.0.1")}},
			old:           []update{{service("api", grpc7070), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc9090), eps("10.0.1.1")}},
			wantEndpoints: []string{"10.0.0.1/HEALTHY", "10.0.1.1/HEALTHY"},
		},
		{
			name:          "a shadowed source's endpoints",
			local:         []update{{service("api", grpc8080), eps("10.0.0.1")}},
			old:           []update{{service("api", grpc8080), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc8080), eps("10.0.1.2")}},
			want:          []model.Event{ev(model.EndpointsChanged, false)},
			wantEndpoints: []string{"10.0.0.1/HEALTHY", "10.0.1.2/HEALTHY"},
		},
		{
			name:          "a host only the old one defined",
			old:           []update{{service("api", grpc8080), eps("10.0.1.1")}},
			want:          []model.Event{ev(model.ServiceDeleted, true)},
			wantEndpoints: nil,
		},
		{
			name:          "a host only the new one defines",
			next:          []update{{service("api", grpc8080), eps("10.0.1.1")}},
			want:          []model.Event{ev(model.ServiceChanged, false)},
			wantEndpoints: []string{"10.0.1.1/HEALTHY"},
		},
		{
			name:          "the new one has no endpoints left for a host the local defines",
			local:         []update{{service("api", grpc8080), nil}},
			old:           []update{{service("api", grpc8080), eps("10.0.1.1")}},
			next:          []update{{service("api", grpc8080), nil}},
			want:          []model.Event{ev(model.EndpointsChanged, true)},
			wantEndpoints: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newAggregate(t, tt.local)
			if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: newRemote(true, tt.old...)}); err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			a.AppendEventHandler(rec.add)
			if err := a.ReplaceSource(t.Context(), "remote", Source{Name: "remote", Controller: newRemote(true, tt.next...)}); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); !slices.Equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
			if got := addresses(a.Endpoints(host, 8080, nil)); !slices.Equal(got, tt.wantEndpoints) {
				t.Errorf("endpoints = %v, want %v", got, tt.wantEndpoints)
			}
		})
	}
}

// TestReplaceKeepsThePrecedence: the replacement takes the old source's
// place, before a source added after it.
func TestReplaceKeepsThePrecedence(t *testing.T) {
	a, _ := newAggregate(t, nil)
	ctx := t.Context()
	grpc7070 := model.Port{Name: "grpc", Port: 7070, Protocol: model.GRPC}
	for _, src := range []struct {
		name string
		port model.Port
	}{{"b", grpc8080}, {"c", grpc7070}} {
		if err := a.AddSource(ctx, Source{Name: src.name, Controller: newRemote(true, update{service("api", src.port), nil})}); err != nil {
			t.Fatal(err)
		}
	}
	next := newRemote(true, update{service("api", grpc9090), nil})
	if err := a.ReplaceSource(ctx, "b", Source{Name: "b", Controller: next}); err != nil {
		t.Fatal(err)
	}
	if got, want := a.Sources(), []string{"s0", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Sources = %v, want %v", got, want)
	}
	if a.GetService(host) != next.GetService(host) {
		t.Fatalf("GetService = %+v, want the replacement's definition", a.GetService(host))
	}
}

// TestTheSingleSourceShortcutEndsWhenASourceIsAdded: one source is served
// as it is; once another joins, reads are the union; once it leaves, the
// single source is served as it is again.
func TestTheSingleSourceShortcutEndsWhenASourceIsAdded(t *testing.T) {
	a, stores := newAggregate(t, []update{{service("api", grpc8080), eps("10.0.0.1")}})
	local := stores[0]
	remote := newRemote(true,
		update{service("api", grpc8080), eps("10.0.1.1")},
		update{service("web", http8080), []*model.Endpoint{endpoint("10.0.1.2", "http", nil)}})
	if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: remote}); err != nil {
		t.Fatal(err)
	}
	if got, want := addresses(a.Endpoints(host, 8080, nil)), []string{"10.0.0.1/HEALTHY", "10.0.1.1/HEALTHY"}; !slices.Equal(got, want) {
		t.Fatalf("Endpoints = %v, want %v", got, want)
	}
	if got := len(a.Services()); got != 2 {
		t.Fatalf("%d services, want 2", got)
	}
	if svcs, n := a.Len(); svcs != 2 || n != 3 {
		t.Fatalf("Len = %d, %d; want 2, 3", svcs, n)
	}
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	local.Update(service("api", grpc8080), nil)
	if got, want := rec.take(), []model.Event{ev(model.EndpointsChanged, false)}; !slices.Equal(got, want) {
		t.Fatalf("a local change: events = %v, want %v (translated: the remote's endpoints remain)", got, want)
	}

	if err := a.RemoveSource("remote"); err != nil {
		t.Fatal(err)
	}
	rec.take()
	local.Update(service("api", grpc8080), eps("10.0.0.2"))
	if got, want := a.Endpoints(host, 8080, nil), local.Endpoints(host, 8080, nil); &got[0] != &want[0] {
		t.Fatal("Endpoints is not the single source's slice once the other left")
	}
	if got, want := rec.take(), []model.Event{ev(model.EndpointsChanged, false)}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestARemovedSourcesEventsAreDropped(t *testing.T) {
	a, _ := newAggregate(t, nil)
	remote := newRemote(true)
	if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: remote}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	a.AppendEventHandler(rec.add)
	remote.Update(service("api", grpc8080), eps("10.0.1.1"))
	if got, want := rec.take(), []model.Event{ev(model.ServiceChanged, false)}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if err := a.RemoveSource("remote"); err != nil {
		t.Fatal(err)
	}
	rec.take()
	remote.Update(service("api", grpc8080), eps("10.0.1.2"))
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a removed source's change: events = %v", got)
	}
	if a.GetService(host) != nil {
		t.Fatal("a removed source's service is served")
	}
}

// TestAddedSourcesRunUntilRemovedOrReplaced: the aggregate runs what it
// adds, stops what it removes or replaces, and keeps a failed source's
// model in force.
func TestAddedSourcesRunUntilRemovedOrReplaced(t *testing.T) {
	var (
		mu     sync.Mutex
		failed []string
	)
	a, err := New(Options{
		Sources: []Source{{Name: "local", Controller: model.NewStore()}},
		SourceFailed: func(name string, err error) {
			mu.Lock()
			failed = append(failed, name+": "+err.Error())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	first, second := newRemote(true, update{service("api", grpc8080), eps("10.0.1.1")}), newRemote(true)
	if err := a.AddSource(ctx, Source{Name: "remote", Controller: first}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the added source runs", first.started.Load)
	if err := a.ReplaceSource(ctx, "remote", Source{Name: "remote", Controller: second}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replaced source stops", first.stopped.Load)
	eventually(t, "the replacement runs", second.started.Load)

	second.Update(service("api", grpc8080), eps("10.0.1.2"))
	second.fail <- errors.New("the API server is gone")
	eventually(t, "the failure is reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(failed, []string{"remote: the API server is gone"})
	})
	if got, want := addresses(a.Endpoints(host, 8080, nil)), []string{"10.0.1.2/HEALTHY"}; !slices.Equal(got, want) {
		t.Fatalf("a failed source's endpoints = %v, want its last ones %v", got, want)
	}

	third := newRemote(true)
	if err := a.AddSource(ctx, Source{Name: "other", Controller: third}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other source runs", third.started.Load)
	if err := a.RemoveSource("other"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removed source stops", third.stopped.Load)
}

func TestChangesOfSourcesRefusedWithAReason(t *testing.T) {
	a, _ := newAggregate(t, nil)
	ctx := t.Context()
	if err := a.AddSource(ctx, Source{Name: "remote", Controller: newRemote(true)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		do   func() error
		want string
	}{
		{"add a name taken", func() error { return a.AddSource(ctx, Source{Name: "remote", Controller: newRemote(true)}) }, `a source is named "remote" already`},
		{"add a name taken by a source of New", func() error { return a.AddSource(ctx, Source{Name: "s0", Controller: newRemote(true)}) }, `"s0" already`},
		{"add without a registry", func() error { return a.AddSource(ctx, Source{Name: "x"}) }, `source "x" has no registry`},
		{"add without a name", func() error { return a.AddSource(ctx, Source{Controller: newRemote(true)}) }, "no name"},
		{"remove a source of New", func() error { return a.RemoveSource("s0") }, `"s0" was given to New`},
		{"remove an unknown source", func() error { return a.RemoveSource("x") }, `no source is named "x"`},
		{"replace an unknown source", func() error { return a.ReplaceSource(ctx, "x", Source{Name: "x", Controller: newRemote(true)}) }, `no source is named "x"`},
		{"replace under another name", func() error { return a.ReplaceSource(ctx, "remote", Source{Name: "y", Controller: newRemote(true)}) }, `by one named "y"`},
	} {
		if err := tt.do(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	if got, want := a.Sources(), []string{"s0", "remote"}; !slices.Equal(got, want) {
		t.Fatalf("Sources = %v, want %v", got, want)
	}
}

// TestAnUnsyncedSourceDoesNotHoldUpReadiness: a remote cluster that never
// syncs must not make the aggregate unready (nor keep it from becoming
// ready).
func TestAnUnsyncedSourceDoesNotHoldUpReadiness(t *testing.T) {
	local := newRemote(false)
	a, err := New(Options{Sources: []Source{{"local", local}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: newRemote(false)}); err != nil {
		t.Fatal(err)
	}
	if a.HasSynced() {
		t.Fatal("synced before the local source is")
	}
	local.synced.Store(true)
	if !a.HasSynced() {
		t.Fatal("an unsynced added source holds up readiness")
	}
}

// TestReplaceWaitsForTheReplacementToSync: until the replacement syncs,
// the old source is served; if it never does, the old one stays and the
// replacement is stopped.
func TestReplaceWaitsForTheReplacementToSync(t *testing.T) {
	a, _ := newAggregate(t, nil)
	old := newRemote(true, update{service("api", grpc8080), eps("10.0.1.1")})
	if err := a.AddSource(t.Context(), Source{Name: "remote", Controller: old}); err != nil {
		t.Fatal(err)
	}

	next := newRemote(false, update{service("api", grpc8080), eps("10.0.1.2")})
	done := make(chan error, 1)
	go func() { done <- a.ReplaceSource(t.Context(), "remote", Source{Name: "remote", Controller: next}) }()
	eventually(t, "the replacement runs", next.started.Load)
	if got, want := addresses(a.Endpoints(host, 8080, nil)), []string{"10.0.1.1/HEALTHY"}; !slices.Equal(got, want) {
		t.Fatalf("before the replacement synced: endpoints = %v, want the old source's %v", got, want)
	}
	next.synced.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := addresses(a.Endpoints(host, 8080, nil)), []string{"10.0.1.2/HEALTHY"}; !slices.Equal(got, want) {
		t.Fatalf("endpoints = %v, want the replacement's %v", got, want)
	}

	never := newRemote(false)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := a.ReplaceSource(ctx, "remote", Source{Name: "remote", Controller: never})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReplaceSource = %v, want the deadline", err)
	}
	eventually(t, "the unsynced replacement stops", never.stopped.Load)
	if a.GetService(host) != next.GetService(host) {
		t.Fatal("the source in force is not kept when its replacement never syncs")
	}
}

// TestReplaceNeverBlinks replaces the source that alone serves a host,
// again and again, while readers check that the host always has its
// definition and endpoints and other sources change: no read and no event
// may show the host gone or without endpoints.
func TestReplaceNeverBlinks(t *testing.T) {
	a, stores := newAggregate(t, nil)
	local := stores[0]
	var blinks atomic.Int64
	a.AppendEventHandler(func(e model.Event) {
		if e.Hostname == host && (e.Kind == model.ServiceDeleted || e.NoEndpoints) {
			blinks.Add(1)
		}
	})
	remoteWith := func(i int) *remoteSource {
		return newRemote(true,
			update{service("api", grpc8080), eps("10.0.1.1", fmt.Sprintf("10.0.2.%d", i%3))},
			update{service("web", http8080), nil})
	}
	ctx := t.Context()
	if err := a.AddSource(ctx, Source{Name: "remote", Controller: remoteWith(0)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if a.GetService(host) == nil || len(a.Endpoints(host, 8080, nil)) == 0 || len(a.Services()) < 2 {
					blinks.Add(1)
				}
			}
		})
	}
	wg.Go(func() { // another source's events, concurrent with the swaps
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			local.Update(service("web", http8080), []*model.Endpoint{endpoint(fmt.Sprintf("10.0.3.%d", i%5), "http", nil)})
		}
	})
	for i := 1; i <= 200; i++ {
		if err := a.ReplaceSource(ctx, "remote", Source{Name: "remote", Controller: remoteWith(i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := blinks.Load(); n > 0 {
		t.Fatalf("the host was seen without its service or endpoints %d times", n)
	}
}
