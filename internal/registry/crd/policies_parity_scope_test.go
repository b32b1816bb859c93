package crd

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestPoliciesMergeRulesOfOneHost: rules of one namespace for one host
// merge as istiod merges them, oldest first; each merged rule's status
// says what it was merged into and which of its parts the older rule's
// replace; when the oldest goes the next one is the base; a rule of
// another namespace is no part of it.
func TestPoliciesMergeRulesOfOneHost(t *testing.T) {
	store := newRuleStore()
	status := configstatus.NewReporter()
	p := NewPolicies(store, PolicyOptions{Status: status, RootNamespace: "istio-system"})
	const reviews = model.Hostname("reviews.ns.svc.cluster.local")
	subset := func(name, version string) *apinetworking.Subset {
		return &apinetworking.Subset{Name: name, Labels: map[string]string{"version": version}}
	}
	random := &apinetworking.TrafficPolicy{LoadBalancer: &apinetworking.LoadBalancerSettings{
		LbPolicy: &apinetworking.LoadBalancerSettings_Simple{Simple: apinetworking.LoadBalancerSettings_RANDOM}}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rule := func(ns, name string, age int, policy *apinetworking.TrafficPolicy, subsets ...*apinetworking.Subset) *networkingv1.DestinationRule {
		return &networkingv1.DestinationRule{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
			Spec:       apinetworking.DestinationRule{Host: string(reviews), TrafficPolicy: policy, Subsets: subsets}}
	}
	// describe says what a rule's status holds, one line per field.
	describe := func(ns, name string) string {
		st, ok := status.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: ns, Name: name})
		if !ok {
			return "none"
		}
		var out []string
		for _, f := range st.Merged {
			out = append(out, "merged "+f.Path+": "+f.Why)
		}
		for _, f := range st.IgnoredGRPC {
			out = append(out, "ignored "+f.Path+": "+f.Why)
		}
		if st.Refused != nil {
			out = append(out, "refused "+st.Refused.Path)
		}
		return strings.Join(out, "\n")
	}
	inForce := func(client string) string {
		r, _ := p.DestinationRuleFor(reviews, "ns", client)
		if r == nil {
			return ""
		}
		var subsets []string
		for _, s := range r.Subsets {
			subsets = append(subsets, s.Name+"="+s.Labels["version"])
		}
		lb := "default"
		if r.Policy != nil && r.Policy.LoadBalancer == model.LBRandom {
			lb = "random"
		}
		return r.Namespace + "/" + strings.Join(append([]string{r.Name}, r.MergedFrom...), "+") + " " + strings.Join(subsets, ",") + " " + lb
	}
	for _, step := range []struct {
		desc, ns, name string
		dr             *networkingv1.DestinationRule
		want           map[string][]string // namespace/name -> parts its status must hold ("": none)
		wantInForce    string
	}{
		{"old alone applies", "ns", "old", rule("ns", "old", 0, nil, subset("v1", "v1")),
			map[string][]string{"ns/old": {""}}, "ns/old v1=v1 default"},
		{"a newer rule, first by name, merges into the older one: its policy is taken, its v1 dropped", "ns", "a",
			rule("ns", "a", 5, random, subset("v2", "v2"), subset("v1", "v2")),
			map[string][]string{
				"ns/old": {""},
				"ns/a": {"merged spec: merged into DestinationRule ns/old, created earlier",
					`ignored spec.subsets[1]: merged into DestinationRule ns/old, created earlier for reviews.ns.svc.cluster.local, which already defines subset "v1"`},
			}, "ns/old+a v1=v1,v2=v2 random"},
		{"the older rule gets a policy of its own: a's is dropped", "ns", "old", rule("ns", "old", 0, &apinetworking.TrafficPolicy{}, subset("v1", "v1")),
			map[string][]string{"ns/a": {"ignored spec.trafficPolicy: merged into DestinationRule ns/old", "ignored spec.subsets[1]"}},
			"ns/old+a v1=v1,v2=v2 default"},
		{"another namespace's rule is no part of it", "other", "c", rule("other", "c", 1, nil, subset("v3", "v3")),
			map[string][]string{"other/c": {""}, "ns/a": {"merged spec"}}, "ns/old+a v1=v1,v2=v2 default"},
		{"the older goes: a applies alone, whole", "ns", "old", nil,
			map[string][]string{"ns/old": {"none"}, "ns/a": {""}}, "ns/a v2=v2,v1=v2 random"},
	} {
		store.apply(step.ns, step.name, step.dr)
		for obj, wants := range step.want {
			ns, name, _ := strings.Cut(obj, "/")
			got := describe(ns, name)
			for _, want := range wants {
				if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
					t.Fatalf("%s: %s's status is\n%s\nwant it to hold %q", step.desc, obj, got, want)
				}
			}
		}
		for _, client := range []string{"ns", "elsewhere"} {
			if got := inForce(client); got != step.wantInForce {
				t.Fatalf("%s: rule in force for a client of %s %q, want %q", step.desc, client, got, step.wantInForce)
			}
		}
	}
}

// TestPoliciesDefaultExportTo: defaultDestinationRuleExportTo ["."]
// makes a rule without exportTo its namespace's alone, as in istiod,
// and a change of it pushes the hosts of such rules.
func TestPoliciesDefaultExportTo(t *testing.T) {
	store := newRuleStore()
	mesh := &fakeMesh{settings: model.DefaultMeshSettings()}
	p := NewPolicies(store, PolicyOptions{RootNamespace: "istio-system", Mesh: mesh})
	var pushed []string
	p.AppendEventHandler(func(ev model.Event) { pushed = append(pushed, ev.Config.Name) })
	for _, dr := range []*networkingv1.DestinationRule{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "quiet"}, Spec: apinetworking.DestinationRule{Host: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "said"}, Spec: apinetworking.DestinationRule{Host: "b", ExportTo: []string{"*"}}},
	} {
		store.apply(dr.Namespace, dr.Name, dr)
	}
	seen := func(host string) bool {
		r, _ := p.DestinationRuleFor(model.Hostname(host+".ns.svc.cluster.local"), "ns", "other")
		return r != nil
	}
	for _, step := range []struct {
		defaults   []string
		wantPushed []string
		wantA      bool
	}{
		{nil, nil, true},
		{[]string{"."}, []string{"a.ns.svc.cluster.local"}, false},
		{[]string{"*"}, []string{"a.ns.svc.cluster.local"}, true},
		// Istio reads only "." there: any other default exports to all.
		{[]string{"other-ns"}, nil, true},
	} {
		pushed = nil
		m := *mesh.settings
		m.DefaultExportTo.DestinationRule = step.defaults
		mesh.set(&m)
		if !slices.Equal(pushed, step.wantPushed) || seen("a") != step.wantA || !seen("b") {
			t.Errorf("default %v: pushed %v, a seen %v, b seen %v; want %v, %v, true", step.defaults, pushed, seen("a"), seen("b"), step.wantPushed, step.wantA)
		}
	}
}

// fakeMesh is a MeshSource whose settings a test sets.
type fakeMesh struct {
	settings *model.MeshSettings
	handlers []model.EventHandler
}

func (m *fakeMesh) Mesh() *model.MeshSettings               { return m.settings }
func (m *fakeMesh) AppendEventHandler(h model.EventHandler) { m.handlers = append(m.handlers, h) }

// set publishes settings and reports the parts that changed.
func (m *fakeMesh) set(s *model.MeshSettings) {
	old := m.settings
	m.settings = s
	for _, k := range model.MeshKeys(old, s) {
		for _, h := range m.handlers {
			h(model.Event{Kind: model.ConfigChanged, Config: k})
		}
	}
}
