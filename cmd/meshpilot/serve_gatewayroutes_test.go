package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestServeWritesRouteStatus runs meshpilot serve against a real API
// server with the Gateway API's CRDs: the status each route's conversion
// computes is written to the route (one entry per Service parent, under
// meshpilot's controller name, at the route's generation), follows a
// change of the route, and its write pushes nothing.
func TestServeWritesRouteStatus(t *testing.T) {
	env.InstallGatewayAPICRDs(t, "standard")
	ns := env.Namespace(t, nil)
	if _, err := env.Client.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: 9080}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns, "--system-namespace", ns,
		"--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)

	gw, err := gatewayclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var hr gatewayv1.HTTPRoute
	if err := yaml.UnmarshalStrict([]byte(`metadata: {name: cart, namespace: `+ns+`}
spec:
  parentRefs: [{group: "", kind: Service, name: cart}]
  rules: [{backendRefs: [{name: cart-v2, port: 9080}]}]`), &hr); err != nil {
		t.Fatal(err)
	}
	routes := gw.GatewayV1().HTTPRoutes(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := routes.Create(ctx, &hr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	conditions := func(want string) {
		t.Helper()
		testenv.Eventually(t, "the route's status "+want, func() (bool, string) {
			cur, err := routes.Get(ctx, "cart", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, ps := range cur.Status.Parents {
				if ps.ControllerName != gwstatus.DefaultControllerName {
					continue
				}
				for _, c := range ps.Conditions {
					if c.ObservedGeneration == cur.Generation {
						got = append(got, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
					}
				}
			}
			return strings.Join(got, " ") == want, fmt.Sprintf("%q", got)
		})
	}
	// cart-v2 does not exist: its share fails.
	conditions("Accepted=True/Accepted ResolvedRefs=False/BackendNotFound")
	cur, err := routes.Get(ctx, "cart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Rules[0].BackendRefs[0].Name = "cart"
	if _, err := routes.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conditions("Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs")
	// The status written is no change of the route: nothing more is
	// pushed for it (a write that came back as an event would push
	// again, and be written again, without end).
	pushes := strings.Count(p.stderr.String(), "key=VirtualService/cart."+ns)
	time.Sleep(2 * time.Second)
	if now := strings.Count(p.stderr.String(), "key=VirtualService/cart."+ns); now != pushes {
		t.Fatalf("%d pushes of the route's host, then %d with nothing changed:\n%s", pushes, now, p.stderr.String())
	}
	p.interrupt()
}
