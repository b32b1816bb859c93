package e2e

import (
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// checkServiceAccountIstioAccess asks the API server what deploy/'s RBAC
// lets the ServiceAccount do with Istio's configuration and its CRDs:
// list and watch on exactly the kinds meshpilot reads (Istio's and the
// Gateway API's), and on exactly their CRDs (crd.CRDNames), by name.
func checkServiceAccountIstioAccess(t *testing.T, ns, sa string) {
	t.Helper()
	type access struct {
		verb, group, resource, name string
		allowed                     bool
	}
	var cases []access
	read := []struct{ group, resource string }{
		{crd.Group, "destinationrules"}, {crd.Group, "virtualservices"}, {crd.Group, "serviceentries"}, {crd.Group, "workloadentries"},
		{crd.SecurityGroup, "peerauthentications"}, {crd.SecurityGroup, "authorizationpolicies"},
		{crd.GatewayGroup, "httproutes"}, {crd.GatewayGroup, "grpcroutes"}, {crd.GatewayGroup, "referencegrants"},
	}
	if len(read) != len(crd.CRDNames()) {
		t.Fatalf("the test checks %d kinds, meshpilot reads %d (%v)", len(read), len(crd.CRDNames()), crd.CRDNames())
	}
	for _, r := range read {
		cases = append(cases,
			access{"list", r.group, r.resource, "", true},
			access{"watch", r.group, r.resource, "", true},
			access{"get", r.group, r.resource, "", false},
			access{"update", r.group, r.resource, "", false})
	}
	for _, name := range crd.CRDNames() {
		cases = append(cases,
			access{"list", "apiextensions.k8s.io", "customresourcedefinitions", name, true},
			access{"watch", "apiextensions.k8s.io", "customresourcedefinitions", name, true},
			access{"get", "apiextensions.k8s.io", "customresourcedefinitions", name, false})
	}
	cases = append(cases,
		access{"list", crd.Group, "gateways", "", false},
		access{"list", crd.Group, "sidecars", "", false},
		access{"list", crd.SecurityGroup, "requestauthentications", "", false},
		access{"list", crd.GatewayGroup, "gateways", "", false},
		access{"list", crd.GatewayGroup, "tcproutes", "", false},
		access{"list", "apiextensions.k8s.io", "customresourcedefinitions", "gateways.gateway.networking.k8s.io", false},
		access{"list", "apiextensions.k8s.io", "customresourcedefinitions", "requestauthentications.security.istio.io", false},
		access{"list", "apiextensions.k8s.io", "customresourcedefinitions", "", false},
		access{"list", "apiextensions.k8s.io", "customresourcedefinitions", "gateways.networking.istio.io", false})
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	for _, c := range cases {
		review, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: c.verb, Group: c.group, Resource: c.resource, Name: c.name,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.allowed {
			t.Errorf("%s may %s %s.%s %q: %v, want %v", user, c.verb, c.resource, c.group, c.name, review.Status.Allowed, c.allowed)
		}
	}
}

// Lines meshpilot logs about Istio's configuration.
const (
	istioMissingLine   = "Istio configuration is not available"
	istioAvailableLine = "Istio configuration available"
)

// checkIstioLateInstall follows a running meshpilot, started on an API
// server without Istio's CRDs, through their installation: it has said
// once that the configuration is not available, and it starts watching
// each kind it reads, with its own rights, without a restart.
func checkIstioLateInstall(t *testing.T, out *testutil.Buffer) {
	t.Helper()
	awaitOutput(t, out, istioMissingLine, 1)
	env.InstallIstioCRDs(t)
	// The Gateway API's CRDs are installed before meshpilot starts
	// (checkGatewayStatusAccess): their kinds are watched from the start,
	// and only Istio's are announced as they come.
	istioCRDs := 0
	for _, name := range crd.CRDNames() {
		if !strings.HasSuffix(name, "."+crd.GatewayGroup) {
			istioCRDs++
		}
	}
	awaitOutput(t, out, istioAvailableLine, istioCRDs)
	if n := strings.Count(out.String(), istioMissingLine); n != 1 {
		t.Fatalf("%q logged %d times, want once:\n%s", istioMissingLine, n, out.String())
	}
}

// awaitOutput waits until out holds line n times.
func awaitOutput(t *testing.T, out *testutil.Buffer, line string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d lines with %q", n, line), func() (bool, string) {
		return strings.Count(out.String(), line) >= n, "output:\n" + out.String()
	})
}
