package aggregate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

func sourceName(s string) string { return s }

// TestPortConflictRules: which definitions of one hostname conflict, and
// what Why says of each difference.
func TestPortConflictRules(t *testing.T) {
	grpcHTTP := model.Port{Name: "grpc", Port: 8080, Protocol: model.HTTP}
	grpcOtherTarget := grpc8080
	grpcOtherTarget.TargetPort = 9999
	def := func(ports ...model.Port) []update { return []update{{service("api", ports...), nil}} }
	for _, tc := range []struct {
		name    string
		sources [][]update
		// want is the sources of the conflict's definitions and its
		// Why; none when wantWhy is empty.
		wantSources []string
		wantWhy     string
	}{
		{name: "one source", sources: [][]update{def(grpc8080)}},
		{name: "same ports in another order", sources: [][]update{def(grpc8080, dnsTCP), def(dnsTCP, grpc8080)}},
		{name: "target ports are the workloads' own", sources: [][]update{def(grpc8080), def(grpcOtherTarget)}},
		{name: "another hostname", sources: [][]update{def(grpc8080),
			{{service("other", http8080), nil}}}},
		{name: "number", sources: [][]update{def(grpc8080), def(grpc9090)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port "grpc" is 8080 in s0, 9090 in s1: 8080 is served, with s1's endpoints`},
		{name: "protocol", sources: [][]update{def(grpc8080), def(grpcHTTP)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port "grpc" is GRPC in s0, HTTP in s1: GRPC is served`},
		{name: "name", sources: [][]update{def(grpc8080), def(http8080)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port 8080 is named "grpc" in s0, "http" in s1: none of s1's endpoints serve it`},
		{name: "a port missing", sources: [][]update{def(grpc8080, dnsTCP), def(grpc8080)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port 53 ("dns-tcp") is not in s1: none of its endpoints serve it`},
		{name: "a port more", sources: [][]update{def(grpc8080), def(grpc8080, dnsUDP)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port 53 ("dns") of s1 is not served`},
		{name: "renumbered, and another port on the old number", sources: [][]update{def(grpc8080), def(grpc9090, http8080)},
			wantSources: []string{"s0", "s1"},
			wantWhy:     `ports differ; the first definition, s0's, is served: port "grpc" is 8080 in s0, 9090 in s1: 8080 is served, with s1's endpoints; port 8080 ("http") of s1 is not served`},
		{name: "the served definition is the first source's that has one", sources: [][]update{nil, def(grpc8080), def(grpc8080), def(http8080)},
			wantSources: []string{"s1", "s2", "s3"},
			wantWhy:     `ports differ; the first definition, s1's, is served: port 8080 is named "grpc" in s1, "http" in s3: none of s3's endpoints serve it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAggregate(t, tc.sources...)
			got := a.PortConflicts()
			if tc.wantWhy == "" {
				if len(got) != 0 {
					t.Fatalf("conflicts %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Hostname != host {
				t.Fatalf("conflicts %+v, want one of %s", got, host)
			}
			var sources []string
			for _, d := range got[0].Definitions {
				sources = append(sources, d.Source)
			}
			if !slices.Equal(sources, tc.wantSources) {
				t.Errorf("definitions of %v, want %v", sources, tc.wantSources)
			}
			if why := got[0].Why(sourceName); why != tc.wantWhy {
				t.Errorf("why\n got %s\nwant %s", why, tc.wantWhy)
			}
		})
	}
}

// TestPortConflictsOrderedByHostname: every conflicting hostname once,
// in hostname order, and none of those whose definitions agree.
func TestPortConflictsOrderedByHostname(t *testing.T) {
	a, _ := newAggregate(t,
		[]update{{service("web", grpc8080), nil}, {service("api", grpc8080), nil}, {service("same", grpc8080), nil}},
		[]update{{service("web", http8080), nil}, {service("same", grpc8080), nil}},
		[]update{{service("api", grpc9090), nil}, {service("web", http8080), nil}},
	)
	var got []string
	for _, c := range a.PortConflicts() {
		got = append(got, string(c.Hostname)+" "+strings.Repeat("+", len(c.Definitions)))
	}
	if want := []string{"api.ns.svc.cluster.local ++", "web.ns.svc.cluster.local +++"}; !slices.Equal(got, want) {
		t.Fatalf("conflicts %v, want %v", got, want)
	}
}

// reports records what ReportPortConflicts reports, as "hostname
// sources" or "hostname ended".
type reports struct {
	mu  sync.Mutex
	got []string
}

func (r *reports) add(c PortConflict, ended bool) {
	line := string(c.Hostname)
	if ended {
		line += " ended"
	}
	for _, d := range c.Definitions {
		line += " " + d.Source
	}
	r.mu.Lock()
	r.got = append(r.got, line)
	r.mu.Unlock()
}

func (r *reports) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// TestPortConflictsReportedOnce: a conflict is reported when it appears
// and when it changes, not on every event of its hostname, and its end
// once; a source added whose definition is shadowed from the start (so
// that nothing served changes and no event is emitted) is checked too.
func TestPortConflictsReportedOnce(t *testing.T) {
	a, stores := newAggregate(t, []update{{service("api", grpc8080), nil}}, nil)
	var r reports
	a.ReportPortConflicts(r.add)
	s0, s1 := stores[0], stores[1]
	step := func(what string, change func(), want ...string) {
		t.Helper()
		change()
		if got := r.take(); !slices.Equal(got, want) {
			t.Fatalf("%s: reported %q, want %q", what, got, want)
		}
	}
	step("the same ports", func() { s1.Update(service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}) })
	step("renumbered", func() { s1.Update(service("api", grpc9090), nil) }, string(host)+" s0 s1")
	step("its endpoints change", func() { s1.Update(service("api", grpc9090), []*model.Endpoint{endpoint("10.0.0.2", "grpc", nil)}) })
	step("the served definition's endpoints change", func() { s0.Update(service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.3", "grpc", nil)}) })
	step("renamed too", func() { s1.Update(service("api", http8080), nil) }, string(host)+" s0 s1")
	step("deleted", func() { s1.Delete(host) }, string(host)+" ended")

	// Named otherwise, the added source's endpoints join no served port:
	// nothing served changes.
	added := model.NewStore()
	added.Update(service("api", http8080), []*model.Endpoint{endpoint("10.0.0.4", "http", nil)})
	step("a source added", func() {
		if err := a.AddSource(context.Background(), Source{Name: "cluster/b", Controller: added}); err != nil {
			t.Fatal(err)
		}
	}, string(host)+" s0 cluster/b")
	step("a source removed", func() {
		if err := a.RemoveSource("cluster/b"); err != nil {
			t.Fatal(err)
		}
	}, string(host)+" ended")
}

// TestConflictChecksAllocateNothing: with a conflict reporter, the
// events of a single source, and those of two sources that agree, cost
// no allocation.
func TestConflictChecksAllocateNothing(t *testing.T) {
	ups := []update{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}}
	for _, tc := range []struct {
		name    string
		sources [][]update
	}{
		{"one source", [][]update{ups}},
		{"two sources that agree", [][]update{ups, ups}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAggregate(t, tc.sources...)
			a.ReportPortConflicts(func(c PortConflict, ended bool) { t.Errorf("reported %+v, %v", c, ended) })
			ev := model.Event{Kind: model.EndpointsChanged, Hostname: host}
			if n := testing.AllocsPerRun(100, func() { a.emit(ev) }); n != 0 {
				t.Fatalf("%v allocations per event", n)
			}
		})
	}
}

func TestSourceClusterAndLabel(t *testing.T) {
	for _, tc := range []struct{ source, cluster, label string }{
		{LocalSource, "local", "local"},
		{"cluster/b", "b", "b"},
		{"serviceentries", "local", "serviceentries"},
		{"files", "local", "files"},
	} {
		if got := SourceCluster(tc.source, "local"); got != tc.cluster {
			t.Errorf("SourceCluster(%q) = %q, want %q", tc.source, got, tc.cluster)
		}
		if got := SourceLabel(tc.source, "local"); got != tc.label {
			t.Errorf("SourceLabel(%q) = %q, want %q", tc.source, got, tc.label)
		}
	}
}
