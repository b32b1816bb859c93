package multicluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

func TestScopeOf(t *testing.T) {
	def := Scope{Namespaces: []string{"flag-ns"}, DiscoverySelectors: []string{"from=flag"}}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        Scope
		// wantErr names the annotation refused and a part of why.
		wantErr []string
	}{
		{name: "none: the flags' scope", want: def},
		{name: "unrelated annotations", annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}, want: def},
		{
			name:        "namespaces replace the flag's",
			annotations: map[string]string{AnnotationNamespaces: "shop,pay"},
			want:        Scope{Namespaces: []string{"shop", "pay"}, DiscoverySelectors: def.DiscoverySelectors},
		},
		{
			name:        "namespaces in CSV quotes, as the flag takes them",
			annotations: map[string]string{AnnotationNamespaces: `"shop",pay`},
			want:        Scope{Namespaces: []string{"shop", "pay"}, DiscoverySelectors: def.DiscoverySelectors},
		},
		{
			name:        "empty namespaces: every namespace",
			annotations: map[string]string{AnnotationNamespaces: ""},
			want:        Scope{DiscoverySelectors: def.DiscoverySelectors},
		},
		{
			name:        "selectors, one per line, replace the flag's",
			annotations: map[string]string{AnnotationDiscoverySelectors: "env=prod,team in (a,b)\n\n  tier!=test  \n"},
			want:        Scope{Namespaces: def.Namespaces, DiscoverySelectors: []string{"env=prod,team in (a,b)", "tier!=test"}},
		},
		{
			name:        "empty selectors: none",
			annotations: map[string]string{AnnotationDiscoverySelectors: ""},
			want:        Scope{Namespaces: def.Namespaces},
		},
		{
			name:        "both",
			annotations: map[string]string{AnnotationNamespaces: "shop", AnnotationDiscoverySelectors: "env=prod"},
			want:        Scope{Namespaces: []string{"shop"}, DiscoverySelectors: []string{"env=prod"}},
		},
		{
			name:        "a space is no namespace name",
			annotations: map[string]string{AnnotationNamespaces: "shop, pay"},
			wantErr:     []string{AnnotationNamespaces, `" pay" is not a namespace name`},
		},
		{
			name:        "upper case is no namespace name",
			annotations: map[string]string{AnnotationNamespaces: "Shop"},
			wantErr:     []string{AnnotationNamespaces, `"Shop"`},
		},
		{
			name:        "a bare quote",
			annotations: map[string]string{AnnotationNamespaces: `sh"op`},
			wantErr:     []string{AnnotationNamespaces, "quote"},
		},
		{
			name:        "a selector that does not parse",
			annotations: map[string]string{AnnotationDiscoverySelectors: "env=prod\nteam in (a"},
			wantErr:     []string{AnnotationDiscoverySelectors, `selector "team in (a"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scopeOf(tc.annotations, def)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, part := range tc.wantErr {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not say %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Namespaces, tc.want.Namespaces) || !slices.Equal(got.DiscoverySelectors, tc.want.DiscoverySelectors) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnnotationsScopeTheSecretsClusters(t *testing.T) {
	s := remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example")})
	s.Annotations = map[string]string{AnnotationNamespaces: "shop"}
	h := start(t, s, remoteSecret("remote-c", map[string][]byte{"c": kubeconfigFor("https://c.example")}))
	h.rec.waitFor(t, `add cluster/b https://b.example namespaces=["shop"] discoverySelectors=[]`, "add cluster/c https://c.example")

	// A changed annotation rebuilds the registry; it is swapped in as a
	// changed kubeconfig is, once synced.
	s.Annotations = map[string]string{AnnotationNamespaces: "shop,pay", AnnotationDiscoverySelectors: "env=prod"}
	h.update(t, s)
	h.rec.waitFor(t, `add cluster/b https://b.example namespaces=["shop"] discoverySelectors=[]`, "add cluster/c https://c.example",
		`replace cluster/b https://b.example namespaces=["shop" "pay"] discoverySelectors=["env=prod"]`)

	// A bad value is refused, saying where and why; the cluster keeps its
	// registry, and a key added meanwhile waits for a good value.
	s.Annotations = map[string]string{AnnotationNamespaces: "shop,Pay"}
	s.Data["d"] = kubeconfigFor("https://d.example")
	h.update(t, s)
	h.awaitLog(t, "annotation refused", "secret=meshpilot-system/remote-b", "annotation="+AnnotationNamespaces, `reason="\"Pay\" is not a namespace name`)
	// The annotation removed: back to the flags' scope, and d comes (in
	// either order: b's replacement syncs off the worker).
	s.Annotations = nil
	h.update(t, s)
	h.rec.waitForSorted(t, `add cluster/b https://b.example namespaces=["shop"] discoverySelectors=[]`, "add cluster/c https://c.example",
		`replace cluster/b https://b.example namespaces=["shop" "pay"] discoverySelectors=["env=prod"]`,
		"replace cluster/b https://b.example", "add cluster/d https://d.example")
}

func TestMeshSelectorsReachEveryRemoteRegistry(t *testing.T) {
	h := start(t, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example")}))
	h.rec.waitFor(t, "add cluster/b https://b.example")
	mesh := []labels.Selector{labels.SelectorFromSet(labels.Set{"mesh": "yes"})}
	h.c.SetMeshDiscoverySelectors(mesh)
	if got := h.registry(t, "b").meshSelectors(); !sameSelectors(got, mesh) {
		t.Fatalf("cluster b's registry has mesh selectors %v, want %v", got, mesh)
	}
	// A registry built later starts with them.
	h.update(t, remoteSecret("remote-b", map[string][]byte{"b": kubeconfigFor("https://b.example"), "c": kubeconfigFor("https://c.example")}))
	h.rec.waitFor(t, "add cluster/b https://b.example", "add cluster/c https://c.example")
	if got := h.registry(t, "c").meshSelectors(); !sameSelectors(got, mesh) {
		t.Fatalf("cluster c's registry has mesh selectors %v, want %v", got, mesh)
	}
}

// registry returns the registry in force of cluster id.
func (h *harness) registry(t *testing.T, id string) *fakeRegistry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.c.mu.Lock()
		var reg Registry
		if cl := h.c.clusters[id]; cl != nil {
			reg = cl.reg
		}
		h.c.mu.Unlock()
		if reg != nil {
			return reg.(*fakeRegistry)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster %s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sameSelectors(a, b []labels.Selector) bool {
	return slices.EqualFunc(a, b, func(x, y labels.Selector) bool { return x.String() == y.String() })
}
