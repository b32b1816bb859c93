package file

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
)

// TestIstioStoreEvents: each reload emits one event for every Istio
// object added, changed, moved or removed, and none for the rest; reads
// and Where follow the objects in force.
func TestIstioStoreEvents(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	store := r.Istio()
	store.AppendEventHandler(func(ev crd.Event) { got = append(got, ev.String()) })
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	const (
		dr = "DestinationRule default/reviews"
		vs = "VirtualService default/reviews"
	)
	steps := []struct {
		name   string
		change func()
		events []string
		// where of the rule and the VirtualService after the step.
		drWhere, vsWhere string
		// problems holds a part of each problem reported after the step.
		problems []string
	}{
		{"first read", func() { write("a.yaml", goodRule+"---\n"+goodVirtualService) }, []string{dr, vs},
			a + ":1 (document 1)", a + ":20 (document 2)", nil},
		{"a rule changes", func() {
			write("a.yaml", strings.Replace(goodRule, "version: v2", "version: v3", 1)+"---\n"+goodVirtualService)
		},
			[]string{dr}, a + ":1 (document 1)", a + ":20 (document 2)", nil},
		{"nothing changes", func() {}, nil, a + ":1 (document 1)", a + ":20 (document 2)", nil},
		{"lines move", func() {
			write("a.yaml", "# rules\n"+strings.Replace(goodRule, "version: v2", "version: v3", 1)+"---\n"+goodVirtualService)
		}, []string{dr, vs}, a + ":2 (document 1)", a + ":21 (document 2)", nil},
		{"a broken edit keeps the last good content", func() {
			write("a.yaml", "# rules\n"+goodRule+"---\n"+strings.Replace(goodVirtualService, "hosts:", "hots:", 1))
		}, nil, a + ":2 (document 1)", a + ":21 (document 2)", []string{a + ": document 2 (line 21): spec.hots: unknown field"}},
		{"a second definition is ignored", func() { write("b.yaml", goodRule) }, nil,
			a + ":2 (document 1)", a + ":21 (document 2)", []string{"spec.hots", b + ": document 1 (line 1): metadata.name: Duplicate value"}},
		{"the first definition goes: the second is used", func() { os.Remove(a) }, []string{dr, vs},
			b + ":1 (document 1)", "", nil},
	}
	for _, step := range steps {
		got = nil
		step.change()
		r.reload(nil, time.Time{})
		if !slices.Equal(got, step.events) {
			t.Errorf("%s: events %q, want %q", step.name, got, step.events)
		}
		if w := store.Where(crd.DestinationRule, "default", "reviews"); w != step.drWhere {
			t.Errorf("%s: rule at %q, want %q", step.name, w, step.drWhere)
		}
		if w := store.Where(crd.VirtualService, "default", "reviews"); w != step.vsWhere {
			t.Errorf("%s: VirtualService at %q, want %q", step.name, w, step.vsWhere)
		}
		if (step.vsWhere != "") != (store.VirtualService("default", "reviews") != nil) || (step.vsWhere != "") != (len(store.VirtualServices()) == 1) {
			t.Errorf("%s: VirtualService read as %v, listed as %v", step.name, store.VirtualService("default", "reviews"), store.VirtualServices())
		}
		problems := r.Problems()
		ok := len(problems) == len(step.problems)
		for i := 0; ok && i < len(problems); i++ {
			ok = strings.Contains(problems[i].Error(), step.problems[i])
		}
		if !ok {
			t.Errorf("%s: problems\n%swant %q", step.name, describe(problems), step.problems)
		}
	}
	if rules := store.DestinationRules(); len(rules) != 1 || rules[0].Spec.GetSubsets()[1].GetLabels()["version"] != "v2" {
		t.Errorf("rules in force %v: want b.yaml's", rules)
	}
}

// TestIstioStoreListsInOrder: lists are ordered by namespace and name,
// as a cluster's are.
func TestIstioStoreListsInOrder(t *testing.T) {
	dir := t.TempDir()
	var docs []string
	for _, ns := range []string{"b", "a-b", "a"} {
		docs = append(docs, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
		for _, name := range []string{"second", "first"} {
			docs = append(docs, "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: "+name+", namespace: "+ns+"}\nspec: {address: 192.0.2.1}\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "f.yaml"), []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.reload(nil, time.Time{})
	var got []string
	for _, we := range r.Istio().WorkloadEntries() {
		got = append(got, we.Namespace+"/"+we.Name)
	}
	if want := []string{"a/first", "a/second", "a-b/first", "a-b/second", "b/first", "b/second"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v (problems: %s)", got, want, describe(r.Problems()))
	}
}

// TestIstioStoreFollowsTheFolder: a saved edit of a rule reaches the
// store's handlers as an event, with the new rule readable.
func TestIstioStoreFollowsTheFolder(t *testing.T) {
	dir := t.TempDir()
	events := make(chan crd.Event, 100)
	h := &harness{t: t, dir: dir}
	h.write("rules.yaml", goodRule)
	h = startWith(t, dir, Options{}, func(r *Registry) {
		r.Istio().AppendEventHandler(func(ev crd.Event) { events <- ev })
	})
	store := h.reg.Istio()
	awaitIstio := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(wait)
		for {
			select {
			case ev := <-events:
				if ev == (crd.Event{Kind: crd.DestinationRule, Namespace: "default", Name: "reviews"}) && cond() {
					return
				}
			case <-timeout:
				t.Fatalf("no event for the rule with %s", what)
			}
		}
	}
	awaitIstio("the first read", func() bool { return store.DestinationRule("default", "reviews") != nil })

	h.write("rules.yaml", strings.Replace(goodRule, "version: v2", "version: v3", 1))
	awaitIstio("the edit", func() bool {
		return store.DestinationRule("default", "reviews").Spec.GetSubsets()[1].GetLabels()["version"] == "v3"
	})

	if err := os.Remove(filepath.Join(dir, "rules.yaml")); err != nil {
		t.Fatal(err)
	}
	awaitIstio("the removal", func() bool { return store.DestinationRule("default", "reviews") == nil })
}

// TestIstioStatusNamesFileAndLine: in file mode the crd consumers refuse
// what they refuse in a cluster, and the status of each object says
// where it was read, following it when it moves.
func TestIstioStatusNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	crd.NewPolicies(r.Istio(), crd.PolicyOptions{Status: status})
	path := filepath.Join(dir, "rules.yaml")
	wildcard := strings.Replace(goodRule, "host: reviews", `host: "reviews.*.example.com"`, 1)
	for _, step := range []struct {
		content, where, state string
	}{
		{goodService + "---\n" + wildcard, path + ":10 (document 2)", "refused"},
		{"# moved\n" + goodService + "---\n" + wildcard, path + ":11 (document 2)", "refused"},
		// Its tcp.connectTimeout is for Envoy alone: reported for gRPC.
		{goodRule, path + ":1 (document 1)", "partial"},
	} {
		if err := os.WriteFile(path, []byte(step.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r.reload(nil, time.Time{})
		entries := status.List()
		if len(entries) != 1 || entries[0].Where != step.where || entries[0].State() != step.state {
			t.Fatalf("status %+v, want one %s entry at %s", entries, step.state, step.where)
		}
	}
}
