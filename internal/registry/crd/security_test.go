package crd

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// memStore (virtualservices_test.go) holds no security policies.
func (s *memStore) PeerAuthentications() []*securityv1.PeerAuthentication    { return nil }
func (s *memStore) AuthorizationPolicies() []*securityv1.AuthorizationPolicy { return nil }
func (s *memStore) PeerAuthentication(string, string) *securityv1.PeerAuthentication {
	return nil
}
func (s *memStore) AuthorizationPolicy(string, string) *securityv1.AuthorizationPolicy {
	return nil
}

// secStore is a Store of security policies set by the test, which sends
// the events itself.
type secStore struct {
	Store   // the other kinds: not read by Security
	peer    map[string]*securityv1.PeerAuthentication
	authz   map[string]*securityv1.AuthorizationPolicy
	handler EventHandler
}

func newSecStore() *secStore {
	return &secStore{peer: map[string]*securityv1.PeerAuthentication{}, authz: map[string]*securityv1.AuthorizationPolicy{}}
}

func (s *secStore) PeerAuthentication(ns, name string) *securityv1.PeerAuthentication {
	return s.peer[ns+"/"+name]
}

func (s *secStore) AuthorizationPolicy(ns, name string) *securityv1.AuthorizationPolicy {
	return s.authz[ns+"/"+name]
}

func (s *secStore) AppendEventHandler(h EventHandler) { s.handler = h }

// applyAuthz writes an AuthorizationPolicy of ns from its spec in YAML
// ("" deletes it) and sends its event.
func (s *secStore) applyAuthz(t *testing.T, ns, name, spec string, created time.Time) {
	t.Helper()
	if spec == "" {
		delete(s.authz, ns+"/"+name)
	} else {
		ap := &securityv1.AuthorizationPolicy{}
		if err := yaml.UnmarshalStrict([]byte(spec), &ap.Spec); err != nil {
			t.Fatal(err)
		}
		ap.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}
		s.authz[ns+"/"+name] = ap
	}
	s.handler(Event{Kind: AuthorizationPolicy, Namespace: ns, Name: name})
}

func (s *secStore) applyPeer(t *testing.T, ns, name, spec string, created time.Time) {
	t.Helper()
	if spec == "" {
		delete(s.peer, ns+"/"+name)
	} else {
		pa := &securityv1.PeerAuthentication{}
		if err := yaml.UnmarshalStrict([]byte(spec), &pa.Spec); err != nil {
			t.Fatal(err)
		}
		pa.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}
		s.peer[ns+"/"+name] = pa
	}
	s.handler(Event{Kind: PeerAuthentication, Namespace: ns, Name: name})
}

// TestSecurityWakesOnlyWhatAPolicySelects: each change carries the keys
// of the policy's old and new versions and nothing else; a refused
// version keeps the last good one in force and wakes nobody.
func TestSecurityWakesOnlyWhatAPolicySelects(t *testing.T) {
	store := newSecStore()
	status := configstatus.NewReporter()
	sec := NewSecurity(store, SecurityOptions{Status: status})
	var got []model.ConfigKey
	sec.AppendEventHandler(func(ev model.Event) {
		if ev.Kind == model.ConfigChanged {
			got = append(got, ev.Config)
		}
	})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const allowA = "selector: {matchLabels: {app: a}}\nrules: [{from: [{source: {namespaces: [ns]}}]}]"
	steps := []struct {
		name   string
		do     func()
		want   []model.ConfigKey
		policy string // the AuthorizationPolicy ns/p's state after the step
	}{
		{"selector app=a", func() { store.applyAuthz(t, "ns", "p", allowA, t0) },
			[]model.ConfigKey{model.SecurityLabelKey("ns", "app", "a")}, "applied"},
		{"namespace-wide PeerAuthentication", func() { store.applyPeer(t, "ns", "default", "mtls: {mode: STRICT}", t0) },
			[]model.ConfigKey{model.SecurityNamespaceKey("ns")}, "applied"},
		{"targetRefs", func() {
			store.applyAuthz(t, "ns", "svc", "targetRefs: [{kind: Service, name: reviews}]\nrules: [{}]", t0)
		}, []model.ConfigKey{model.SecurityServiceKey("ns", "reviews")}, "applied"},
		{"selector changed: old and new keys", func() {
			store.applyAuthz(t, "ns", "p", "selector: {matchLabels: {app: b}}\nrules: [{}]", t0)
		}, []model.ConfigKey{model.SecurityLabelKey("ns", "app", "a"), model.SecurityLabelKey("ns", "app", "b")}, "applied"},
		{"refused: nothing changes", func() {
			store.applyAuthz(t, "ns", "p", "selector: {matchLabels: {app: c}}\naction: DENY", t0)
		}, nil, "refused"},
		{"deleted: the last good version's keys", func() { store.applyAuthz(t, "ns", "p", "", t0) },
			[]model.ConfigKey{model.SecurityLabelKey("ns", "app", "b")}, ""},
	}
	for _, step := range steps {
		got = nil
		step.do()
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: events %v, want %v", step.name, got, step.want)
		}
		st, ok := status.Get(configstatus.Ref{Kind: string(AuthorizationPolicy), Namespace: "ns", Name: "p"})
		state := ""
		if ok {
			state = configstatus.Entry{Status: st}.State()
			if state == configstatus.StatePartial {
				state = configstatus.StateApplied // Envoy's note is on every policy
			}
		}
		if state != step.policy {
			t.Errorf("%s: ns/p is %q, want %q (%+v)", step.name, state, step.policy, st)
		}
		if step.name == "refused: nothing changes" {
			// The last good version (app=b) is still in force.
			p := sec.SecurityPoliciesFor("ns")
			if !slices.ContainsFunc(p.Authz, func(a *model.AuthorizationPolicy) bool { return a.Name == "p" && a.Selector["app"] == "b" }) {
				t.Errorf("after a refusal, ns/p is not its last good version: %+v", p.Authz)
			}
		}
	}
}

// TestSecurityPoliciesFor: a namespace's policies and the root
// namespace's, oldest first, and those of another namespace never.
func TestSecurityPoliciesFor(t *testing.T) {
	store := newSecStore()
	sec := NewSecurity(store, SecurityOptions{RootNamespace: "mesh"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store.applyPeer(t, "ns", "new", "mtls: {mode: DISABLE}", t0.Add(time.Hour))
	store.applyPeer(t, "mesh", "default", "mtls: {mode: STRICT}", t0)
	store.applyPeer(t, "other", "x", "mtls: {mode: STRICT}", t0)
	store.applyAuthz(t, "ns", "b", "rules: [{}]", t0)
	store.applyAuthz(t, "ns", "a", "rules: [{}]", t0)
	p := sec.SecurityPoliciesFor("ns")
	var names []string
	for _, pa := range p.Peer {
		names = append(names, pa.Namespace+"/"+pa.Name)
	}
	for _, ap := range p.Authz {
		names = append(names, ap.Namespace+"/"+ap.Name)
	}
	want := []string{"mesh/default", "ns/new", "ns/a", "ns/b"}
	if p.RootNamespace != "mesh" || !slices.Equal(names, want) {
		t.Fatalf("SecurityPoliciesFor(ns) = %s %v, want mesh %v", p.RootNamespace, names, want)
	}
	if mode, _ := model.MTLSFor(p, "ns", nil, 8080); mode != model.MTLSDisable {
		t.Errorf("mode = %v, want DISABLE (the namespace's over the mesh's)", mode)
	}
}

// TestSecurityRootSelectorReported: a PeerAuthentication with a selector
// in the root namespace applies to no workload, as in Istio; its status
// says so, and the same policy in another namespace has no such note.
func TestSecurityRootSelectorReported(t *testing.T) {
	store := newSecStore()
	status := configstatus.NewReporter()
	sec := NewSecurity(store, SecurityOptions{RootNamespace: "mesh", Status: status})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const spec = "selector: {matchLabels: {app: a}}\nmtls: {mode: STRICT}"
	store.applyPeer(t, "mesh", "workloads", spec, t0)
	store.applyPeer(t, "ns", "workloads", spec, t0)
	st, _ := status.Get(configstatus.Ref{Kind: string(PeerAuthentication), Namespace: "mesh", Name: "workloads"})
	if !slices.ContainsFunc(st.IgnoredGRPC, func(f configstatus.Field) bool { return f.Path == "spec.selector" }) {
		t.Errorf("the root namespace's policy: ignored for gRPC %+v, want spec.selector", st.IgnoredGRPC)
	}
	st, _ = status.Get(configstatus.Ref{Kind: string(PeerAuthentication), Namespace: "ns", Name: "workloads"})
	if slices.ContainsFunc(st.IgnoredGRPC, func(f configstatus.Field) bool { return f.Path == "spec.selector" }) {
		t.Errorf("a namespace's policy: ignored for gRPC %+v, want no spec.selector", st.IgnoredGRPC)
	}
	if mode, found := model.MTLSFor(sec.SecurityPoliciesFor("mesh"), "mesh", map[string]string{"app": "a"}, 8080); found || mode != model.MTLSPermissive {
		t.Errorf("a root namespace workload the selector matches: %v (found %v), want PERMISSIVE by default", mode, found)
	}
}
