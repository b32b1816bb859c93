package crd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

func TestSetRootReportsHosts(t *testing.T) {
	p := &Policies{root: "sys", rules: map[string]*model.DestinationRule{}, naming: map[model.Hostname]map[string]*model.DestinationRule{},
		index: model.RuleIndex{ByHost: map[model.Hostname]model.HostRules{}}}
	for _, r := range []*model.DestinationRule{
		{Namespace: "ns", Name: "a", Host: "a.ns.svc.cluster.local"},
		{Namespace: "mesh", Name: "b", Host: "b.ns.svc.cluster.local"},
		{Namespace: "sys", Name: "c", Host: "c.ns.svc.cluster.local"},
		{Namespace: "mesh", Name: "d", Host: "d.ns.svc.cluster.local"},
		{Namespace: "sys", Name: "d", Host: "d.ns.svc.cluster.local"},
		// Reported under its own key, which readers of the hosts it
		// matches depend on.
		{Namespace: "mesh", Name: "w", Host: "*.ns.svc.cluster.local"},
	} {
		p.set(r.Namespace+"/"+r.Name, r)
	}
	for _, step := range []struct {
		root string
		want []model.Hostname
	}{
		{"sys", nil},
		{"mesh", []model.Hostname{"*.ns.svc.cluster.local", "b.ns.svc.cluster.local", "c.ns.svc.cluster.local", "d.ns.svc.cluster.local"}},
		{"empty", []model.Hostname{"*.ns.svc.cluster.local", "b.ns.svc.cluster.local", "d.ns.svc.cluster.local"}},
		{"ns", []model.Hostname{"a.ns.svc.cluster.local"}},
	} {
		if got := p.setRoot(step.root); !slices.Equal(got, step.want) {
			t.Errorf("root %s: hosts %v, want %v", step.root, got, step.want)
		}
	}
}

// TestRootNamespaceFollowsMeshConfig edits a mesh config file: the rules
// of the root namespace it names apply mesh-wide, and a change pushes
// the rules of the hosts that have one in the old or the new root
// namespace, and nothing when it leaves the root namespace alone.
func TestRootNamespaceFollowsMeshConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("{}\n")
	lines := testutil.NewLines()
	mesh, err := meshconfig.FromFile(path, slog.New(slog.NewTextHandler(lines, nil)))
	if err != nil {
		t.Fatal(err)
	}
	store := &ruleStore{rules: map[string]*networkingv1.DestinationRule{}}
	p := NewPolicies(store, PolicyOptions{RootNamespace: "meshpilot-system", Mesh: mesh})
	var mu sync.Mutex // guards pushed
	var pushed []string
	p.AppendEventHandler(func(ev model.Event) {
		mu.Lock()
		pushed = append(pushed, ev.Config.String())
		mu.Unlock()
	})
	for _, r := range []struct{ ns, host string }{
		{"meshpilot-system", "a.apps.svc.cluster.local"},
		{"istio-system", "b.apps.svc.cluster.local"},
		{"apps", "c.apps.svc.cluster.local"},
	} {
		store.rules[r.ns+"/rule"] = &networkingv1.DestinationRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "rule"},
			Spec:       apinetworking.DestinationRule{Host: r.host},
		}
		store.handler(Event{Kind: DestinationRule, Namespace: r.ns, Name: "rule"})
	}
	// ruleFor says which namespace's rule a client of namespace web gets.
	ruleFor := func(host string) string {
		r, _ := p.DestinationRuleFor(model.Hostname(host), "apps", "web")
		if r == nil {
			return ""
		}
		return r.Namespace
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mesh.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	for _, step := range []struct {
		desc, mesh string
		pushed     []string
		a, b, c    string // the namespace of the rule a client gets for each host
	}{
		{"the default: --system-namespace", "", nil, "meshpilot-system", "", "apps"},
		{"istio-system", "rootNamespace: istio-system\n",
			[]string{"DestinationRule/a.apps.svc.cluster.local", "DestinationRule/b.apps.svc.cluster.local"}, "", "istio-system", "apps"},
		{"another field", "rootNamespace: istio-system\ndefaultHttpRetryPolicy: {attempts: 1}\n", nil, "", "istio-system", "apps"},
		{"unset again", "defaultHttpRetryPolicy: {attempts: 1}\n",
			[]string{"DestinationRule/a.apps.svc.cluster.local", "DestinationRule/b.apps.svc.cluster.local"}, "meshpilot-system", "", "apps"},
	} {
		mu.Lock()
		pushed = nil
		mu.Unlock()
		if step.mesh != "" {
			from := lines.Len()
			write(step.mesh)
			lines.Await(t, step.desc+" in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
		}
		testenv.Eventually(t, step.desc, func() (bool, string) {
			mu.Lock()
			got := slices.Clone(pushed)
			mu.Unlock()
			slices.Sort(got)
			a, b, c := ruleFor("a.apps.svc.cluster.local"), ruleFor("b.apps.svc.cluster.local"), ruleFor("c.apps.svc.cluster.local")
			ok := slices.Equal(got, step.pushed) && a == step.a && b == step.b && c == step.c
			return ok, "pushed " + strings.Join(got, " ") + "; rules of a, b, c from " + strings.Join([]string{a, b, c}, ", ")
		})
	}
}
