package crd

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisecurity "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	securityclient "istio.io/client-go/pkg/clientset/versioned/typed/security/v1"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// createSecurityObjects creates one object of each security kind in ns,
// named name.
func createSecurityObjects(t *testing.T, sec securityclient.SecurityV1Interface, ns, name string) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	if _, err := sec.PeerAuthentications(ns).Create(t.Context(), &securityv1.PeerAuthentication{ObjectMeta: meta, Spec: apisecurity.PeerAuthentication{
		Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "reviews"}},
		Mtls:     &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_STRICT},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sec.AuthorizationPolicies(ns).Create(t.Context(), &securityv1.AuthorizationPolicy{ObjectMeta: meta, Spec: apisecurity.AuthorizationPolicy{
		Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "reviews"}},
		Rules:    []*apisecurity.Rule{{From: []*apisecurity.Rule_From{{Source: &apisecurity.Source{Namespaces: []string{ns}}}}}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLateInstallSecurity starts a registry on an API server without
// Istio's CRDs, installs them while it runs, and follows the security
// kinds through the reads and the events, as TestLateInstall does the
// traffic kinds: no restart, one log line while they are missing.
func TestLateInstallSecurity(t *testing.T) {
	env := ownAPIServer(t)
	ctx := t.Context()
	logs := testutil.NewLines()
	r, rec := startRegistry(t, env, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ns := env.Namespace(t, nil)

	testenv.Eventually(t, "synced without the CRDs", func() (bool, string) { return r.HasSynced(), "" })
	logs.Await(t, notAvailable, 0, func(l string) bool { return strings.Contains(l, notAvailable) })
	if r.Watching(PeerAuthentication) || r.Watching(AuthorizationPolicy) {
		t.Fatal("a security kind is watched before its CRD exists")
	}
	if !strings.Contains(logs.String(), "peerauthentications.security.istio.io") {
		t.Errorf("the missing CRDs logged do not name the security kinds':\n%s", logs.String())
	}
	if got := r.AuthorizationPolicies(); len(got) != 0 {
		t.Fatalf("AuthorizationPolicies() = %v without the CRD", got)
	}

	env.InstallIstioCRDs(t)
	env.InstallGatewayAPICRDs(t, "standard")
	testenv.Eventually(t, "the security kinds watched and synced", func() (bool, string) {
		return r.Watching(PeerAuthentication) && r.Watching(AuthorizationPolicy) && r.HasSynced(), ""
	})
	for _, kind := range []Kind{PeerAuthentication, AuthorizationPolicy} {
		logs.Await(t, "available: "+string(kind), 0, func(l string) bool {
			return strings.Contains(l, "Istio configuration available") && strings.Contains(l, "kind="+string(kind))
		})
	}

	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sec := istio.SecurityV1()
	sp := &syncer{net: istio.NetworkingV1(), sec: sec, gw: gatewayClient(t, env), ns: ns}
	createSecurityObjects(t, sec, ns, "reviews")
	waitEvents(t, sp, rec, ns, Event{PeerAuthentication, ns, "reviews"}, Event{AuthorizationPolicy, ns, "reviews"})

	pa := r.PeerAuthentication(ns, "reviews")
	if pa == nil || pa.Spec.GetMtls().GetMode() != apisecurity.PeerAuthentication_MutualTLS_STRICT || pa.ManagedFields != nil {
		t.Fatalf("PeerAuthentication(%s, reviews) = %v", ns, pa)
	}
	ap := r.AuthorizationPolicy(ns, "reviews")
	if ap == nil || ap.Spec.GetRules()[0].GetFrom()[0].GetSource().GetNamespaces()[0] != ns {
		t.Fatalf("AuthorizationPolicy(%s, reviews) = %v", ns, ap)
	}
	in := func(objs []metav1.Object) bool {
		return slices.ContainsFunc(objs, func(o metav1.Object) bool { return o.GetNamespace() == ns && o.GetName() == "reviews" })
	}
	if !in(asObjects(r.PeerAuthentications())) || !in(asObjects(r.AuthorizationPolicies())) {
		t.Fatal("the lists lack the policies")
	}

	// A spec change: one event; a delete: one event, and the read says nil.
	ap = ap.DeepCopy()
	ap.Spec.Action = apisecurity.AuthorizationPolicy_DENY
	if _, err := sec.AuthorizationPolicies(ns).Update(ctx, ap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sec.PeerAuthentications(ns).Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, sp, rec, ns, Event{AuthorizationPolicy, ns, "reviews"}, Event{PeerAuthentication, ns, "reviews"})
	if r.PeerAuthentication(ns, "reviews") != nil || r.AuthorizationPolicy(ns, "reviews").Spec.GetAction() != apisecurity.AuthorizationPolicy_DENY {
		t.Fatal("the reads do not follow the update and the delete")
	}
	if n := strings.Count(logs.String(), notAvailable); n != 1 {
		t.Fatalf("%q logged %d times, want once:\n%s", notAvailable, n, logs.String())
	}
}
