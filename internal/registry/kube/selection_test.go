package kube

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestSelectionUnion checks the rule: a namespace is selected when it
// matches any selector of the flag's or MeshConfig's, every namespace is
// when neither gives one, and an unknown namespace only then.
func TestSelectionUnion(t *testing.T) {
	parse := func(ss ...string) []labels.Selector {
		var out []labels.Selector
		for _, s := range ss {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sel)
		}
		return out
	}
	ns := func(l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: l}}
	}
	for _, tc := range []struct {
		desc       string
		flag, mesh []labels.Selector
		ns         *corev1.Namespace
		want       bool
	}{
		{desc: "no selectors: every namespace", ns: ns(nil), want: true},
		{desc: "no selectors: even one not known yet", ns: nil, want: true},
		{desc: "flag only, matching", flag: parse("env=prod"), ns: ns(map[string]string{"env": "prod"}), want: true},
		{desc: "flag only, not matching", flag: parse("env=prod"), ns: ns(map[string]string{"env": "dev"}), want: false},
		{desc: "mesh only, matching", mesh: parse("env=dev"), ns: ns(map[string]string{"env": "dev"}), want: true},
		{desc: "mesh only, not matching", mesh: parse("env=dev"), ns: ns(nil), want: false},
		{desc: "both: the flag's selects", flag: parse("env=prod"), mesh: parse("env=dev"), ns: ns(map[string]string{"env": "prod"}), want: true},
		{desc: "both: the mesh's selects", flag: parse("env=prod"), mesh: parse("env=dev"), ns: ns(map[string]string{"env": "dev"}), want: true},
		{desc: "both: neither selects", flag: parse("env=prod"), mesh: parse("env=dev"), ns: ns(map[string]string{"env": "test"}), want: false},
		{desc: "selectors: an unknown namespace is not selected", flag: parse("env=prod"), ns: nil, want: false},
		{desc: "an empty mesh selector selects all", flag: parse("env=prod"), mesh: []labels.Selector{labels.Everything()}, ns: ns(nil), want: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &namespaceSelection{flag: tc.flag}
			before, after := s.setMesh(tc.mesh)
			if len(before) != len(tc.flag) || len(after) != len(tc.flag)+len(tc.mesh) {
				t.Fatalf("setMesh: %d before, %d after; want %d, %d", len(before), len(after), len(tc.flag), len(tc.flag)+len(tc.mesh))
			}
			if got := selects(s.selectors(), tc.ns); got != tc.want {
				t.Fatalf("selected = %v, want %v", got, tc.want)
			}
			// Removing MeshConfig's selectors leaves the flag's.
			s.setMesh(nil)
			if got, want := selects(s.selectors(), tc.ns), selects(tc.flag, tc.ns); got != want {
				t.Fatalf("after removing the mesh's: selected = %v, want %v", got, want)
			}
		})
	}
}

// meshConfigMap follows ConfigMap istio of namespace sys with a running
// meshconfig.Watcher, as serve does, and returns it and a function that
// writes the ConfigMap's mesh key.
func meshConfigMap(t *testing.T, sys string) (*meshconfig.Watcher, func(mesh string)) {
	t.Helper()
	w := meshconfig.FromConfigMap(env.API, sys, nil)
	write := func(mesh string) {
		t.Helper()
		cms := env.Client.CoreV1().ConfigMaps(sys)
		cm, err := cms.Get(ctx(t), meshconfig.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: meshconfig.ConfigMapName}}
			cm.Data = map[string]string{meshconfig.ConfigMapKey: mesh}
			if _, err := cms.Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return
		}
		cm.Data = map[string]string{meshconfig.ConfigMapKey: mesh}
		if _, err := cms.Update(ctx(t), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return w, write
}

// startWithMesh starts a controller that follows w's discovery selectors,
// wired as serve wires them, and runs w.
func startWithMesh(t *testing.T, w *meshconfig.Watcher, opts Options) (*Controller, *recorder) {
	t.Helper()
	opts.MeshSynced = w.Synced()
	rec := newRecorder(env.Client, "")
	if len(opts.Namespaces) > 0 {
		rec.syncNS = opts.Namespaces[0]
	}
	c, err := New(env.API, rec.instrument(opts))
	if err != nil {
		t.Fatal(err)
	}
	c.SetMeshDiscoverySelectors(w.DiscoverySelectors())
	w.AppendSelectorHandler(c.SetMeshDiscoverySelectors)
	// The controller waits for the mesh config: both must run.
	runUntilEnd(t, "mesh watcher", w.Run)
	runController(t, c, rec)
	return c, rec
}

// present lists, in the order given, the hostnames the model holds.
func present(c *Controller, hosts ...model.Hostname) string {
	var out []string
	for _, h := range hosts {
		if c.GetService(h) != nil {
			out = append(out, string(h))
		}
	}
	return strings.Join(out, ",")
}

// TestMeshConfigSelectorsLive runs the registry beside a MeshConfig
// ConfigMap whose discoverySelectors change: the flag's and MeshConfig's
// selectors are one union from the first model on; each change adds and
// deletes the services of exactly the namespaces whose selection
// changed; a bad selector changes nothing.
func TestMeshConfigSelectorsLive(t *testing.T) {
	sys := env.Namespace(t, nil)
	// A label of this test's own, so that its selectors select none of
	// the other tests' namespaces.
	mark := func(tier string) map[string]string { return map[string]string{"selection-test": sys, "tier": tier} }
	front, back, db := env.Namespace(t, mark("front")), env.Namespace(t, mark("back")), env.Namespace(t, mark("db"))
	host := map[string]model.Hostname{}
	for _, ns := range []string{front, back, db} {
		mustCreateService(t, ns, "svc", grpcPort)
		host[ns] = model.ServiceHostname("svc", ns, model.DefaultDomainSuffix)
	}
	selector := func(tier string) string {
		return fmt.Sprintf("{matchLabels: {selection-test: %s}, matchExpressions: [{key: tier, operator: In, values: [%s]}]}", sys, tier)
	}
	w, write := meshConfigMap(t, sys)
	write("discoverySelectors: [" + selector("back") + "]")

	c, rec := startWithMesh(t, w, Options{DiscoverySelectors: []string{"selection-test=" + sys + ",tier=front"}})
	rec.syncNS = front // selected by the flag throughout
	// Synced means built with MeshConfig's selectors in force.
	if got, want := present(c, host[front], host[back], host[db]), string(host[front])+","+string(host[back]); got != want {
		t.Fatalf("at sync the model holds %q, want %q", got, want)
	}
	for _, ns := range []string{front, back, db} {
		settledEvents(t, rec, ns)
	}

	// MeshConfig now selects db instead of back: db's service is added,
	// back's deleted, front's (the flag's) untouched.
	write("discoverySelectors: [" + selector("db") + "]")
	waitEvents(t, rec, db, model.Event{Kind: model.ServiceChanged, Hostname: host[db], Namespace: db, NoEndpoints: true})
	waitEvents(t, rec, back, model.Event{Kind: model.ServiceDeleted, Hostname: host[back], Namespace: back, NoEndpoints: true})
	assertNoEvents(t, rec, front)
	if got, want := present(c, host[front], host[back], host[db]), string(host[front])+","+string(host[db]); got != want {
		t.Fatalf("model holds %q, want %q", got, want)
	}

	// A bad selector is refused: the last good ones stay, nothing moves.
	write("discoverySelectors: [{matchExpressions: [{key: tier, operator: Equals, values: [back]}]}]")
	testenv.Eventually(t, "the refusal", func() (bool, string) {
		st := w.Status("")
		return strings.Contains(st.Refused, "discoverySelectors[0].matchExpressions[0].operator"), st.Refused
	})
	assertNoEvents(t, rec, front, back, db)
	if got, want := present(c, host[front], host[back], host[db]), string(host[front])+","+string(host[db]); got != want {
		t.Fatalf("after a bad selector the model holds %q, want %q", got, want)
	}

	// Without MeshConfig selectors the flag's alone select.
	write("{}")
	waitEvents(t, rec, db, model.Event{Kind: model.ServiceDeleted, Hostname: host[db], Namespace: db, NoEndpoints: true})
	assertNoEvents(t, rec, front, back)

	// A namespace relabelled to match MeshConfig's selectors joins, as
	// with the flag's.
	// The new selector selects no namespace yet: once the controller has
	// it, nothing changes.
	write("discoverySelectors: [" + selector("cache") + "]")
	testenv.Eventually(t, "the controller following the new selector", func() (bool, string) {
		sel := c.selection.selectors()
		return selects(sel, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: mark("cache")}}), fmt.Sprintf("%v", sel)
	})
	assertNoEvents(t, rec, front, back, db)
	nsObj, err := env.Client.CoreV1().Namespaces().Get(ctx(t), back, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels = mark("cache")
	if _, err := env.Client.CoreV1().Namespaces().Update(ctx(t), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, rec, back, model.Event{Kind: model.ServiceChanged, Hostname: host[back], Namespace: back, NoEndpoints: true})
}

// TestMeshConfigSelectorsWithinNamespaces: with Options.Namespaces
// (--namespaces), MeshConfig's selectors only choose among those
// namespaces; a namespace outside stays out whatever its labels.
func TestMeshConfigSelectorsWithinNamespaces(t *testing.T) {
	sys := env.Namespace(t, nil)
	mark := map[string]string{"selection-test": sys}
	in, other, out := env.Namespace(t, mark), env.Namespace(t, nil), env.Namespace(t, mark)
	host := map[string]model.Hostname{}
	for _, ns := range []string{in, other, out} {
		mustCreateService(t, ns, "svc", grpcPort)
		host[ns] = model.ServiceHostname("svc", ns, model.DefaultDomainSuffix)
	}
	w, write := meshConfigMap(t, sys)
	write("discoverySelectors: [{matchLabels: {selection-test: " + sys + "}}]")
	c, rec := startWithMesh(t, w, Options{Namespaces: []string{in, other}})
	if got := present(c, host[in], host[other], host[out]); got != string(host[in]) {
		t.Fatalf("at sync the model holds %q, want only %q", got, host[in])
	}
	settledEvents(t, rec, in)
	settledEvents(t, rec, other)

	// No selectors: every namespace of --namespaces, still none outside.
	write("{}")
	waitEvents(t, rec, other, model.Event{Kind: model.ServiceChanged, Hostname: host[other], Namespace: other, NoEndpoints: true})
	assertNoEvents(t, rec, in, out)
	if c.GetService(host[out]) != nil {
		t.Fatal("a service outside --namespaces is in the model")
	}
}
