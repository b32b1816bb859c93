package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisecurity "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestStatusConfigSecurityKinds runs meshpilot serve against a real API
// server with Istio's CRDs: an AuthorizationPolicy with a malformed CIDR
// shows as refused on /debug/configz and in `status config`, naming the
// field; fixed, it and a PeerAuthentication show as partial, with what
// Envoy does not get from meshpilot.
func TestStatusConfigSecurityKinds(t *testing.T) {
	env.InstallIstioCRDs(t)
	ns := env.Namespace(t, nil)
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)
	server := "http://" + httpAddr

	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rule := func(cidr string) []*apisecurity.Rule {
		return []*apisecurity.Rule{{From: []*apisecurity.Rule_From{{Source: &apisecurity.Source{IpBlocks: []string{cidr}}}}}}
	}
	aps := istio.SecurityV1().AuthorizationPolicies(ns)
	ap, err := aps.Create(ctx, &securityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec:       apisecurity.AuthorizationPolicy{Rules: rule("192.0.2.0/33")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := istio.SecurityV1().PeerAuthentications(ns).Create(ctx, &securityv1.PeerAuthentication{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec:       apisecurity.PeerAuthentication{Mtls: &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_STRICT}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := func(apState string) {
		t.Helper()
		testenv.Eventually(t, "both policies on /debug/configz", func() (bool, string) {
			var z debug.Configz
			if err := getJSON(ctx, statusFlags{server: server, timeout: 5 * time.Second}, "/debug/configz", &z); err != nil {
				return false, err.Error()
			}
			var got []string
			for _, o := range z.Objects {
				got = append(got, fmt.Sprintf("%s %s/%s %s", o.Kind, o.Namespace, o.Name, o.State))
			}
			want := []string{"AuthorizationPolicy " + ns + "/reviews " + apState, "PeerAuthentication " + ns + "/default " + configstatus.StatePartial}
			return slices.Equal(got, want), fmt.Sprintf("%q", got)
		})
	}
	want(configstatus.StateRefused)
	out, code := runStatus(t, "--server", server, "config")
	refusal := fmt.Sprintf("Error [refused] (AuthorizationPolicy %s/reviews) spec.rules[0].from[0].source.ipBlocks: ", ns)
	if !strings.HasPrefix(out, refusal) || code != exitRefused {
		t.Fatalf("status config: exit %d, output:\n%s\nwant exit %d, starting %q", code, out, exitRefused, refusal)
	}

	ap.Spec.Rules = rule("192.0.2.0/24")
	if _, err := aps.Update(ctx, ap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(configstatus.StatePartial)
	out, code = runStatus(t, "--server", server, "config")
	if code != 0 || !strings.Contains(out, "(PeerAuthentication "+ns+"/default) spec: ") || !strings.Contains(out, "Envoy sidecars do not get this policy") {
		t.Fatalf("status config after the fix: exit %d, output:\n%s", code, out)
	}

	// What the listener generator cannot enforce is reported as it
	// builds the filters: a condition on the TLS server name, which a
	// gRPC server never sees.
	cur, err := aps.Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Rules[0].When = []*apisecurity.Condition{{Key: "connection.sni", Values: []string{"reviews.example"}}}
	if _, err := aps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	note := fmt.Sprintf("(AuthorizationPolicy %s/reviews) spec.rules[0].when[0]", ns)
	testenv.Eventually(t, "the SNI condition reported", func() (bool, string) {
		out, _ := runStatus(t, "--server", server, "config")
		return strings.Contains(out, note) && strings.Contains(out, "the rule allows nothing"), out
	})
	p.interrupt()
}
