package e2e

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// startPolicies runs the Istio registry of ns with its DestinationRule
// view, as meshpilot serve wires it.
func startPolicies(t *testing.T, ns string) *crd.Policies {
	t.Helper()
	var policies *crd.Policies
	runIstio(t, ns, func(store crd.Store) {
		policies = crd.NewPolicies(store, crd.PolicyOptions{RootNamespace: "istio-system"})
	})
	return policies
}

// runIstio runs the Istio registry of ns until the test ends, with the
// consumers attach builds from it before it runs, as serve does. The
// Istio CRDs are installed first. The tests that use it come after the
// deploy test, which needs the API server without them at its start.
func runIstio(t *testing.T, ns string, attach func(crd.Store)) {
	t.Helper()
	env.InstallIstioCRDs(t)
	reg, err := crd.NewForConfig(env.Config, crd.Options{Namespaces: []string{ns}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	attach(reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("istio registry: %v", err)
		}
	})
}

// TestDestinationRuleSubsetsFromKubernetes: with a real API server and
// Istio's CRDs, applying a DestinationRule with two subsets makes their
// clusters and label-selected endpoints appear to a subscribed xDS client,
// with the rule's load balancer, and deleting it makes the clusters go. An ADS
// test client stands for gRPC: grpc-go asks for a subset cluster only
// when a route names it (VirtualService).
func TestDestinationRuleSubsetsFromKubernetes(t *testing.T) {
	ns := env.Namespace(t, nil)
	createService(t, ns, "reviews", 9080)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(9080))}},
	}
	for i, version := range []string{"v1", "v2", "v2"} {
		name, ip := "reviews-"+string(rune('a'+i)), "192.0.2."+string(rune('1'+i))
		env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "reviews", "version": version}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
		}, ip)
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name},
		})
	}
	env.ApplyEndpointSlice(t, slice)
	srv := startObserved(t, ns, server.Options{Policies: startPolicies(t, ns)})

	host := model.ServiceHostname("reviews", ns, "")
	whole, v1, v2 := model.ClusterName(9080, "", host), model.ClusterName(9080, "v1", host), model.ClusterName(9080, "v2", host)
	c := xdstest.Dial(t, srv.XDSAddr(), xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: "client", Namespace: ns}), AutoACK: true, Wait: grpctest.Wait})
	c.Subscribe(resource.ClusterType, whole, v1, v2)
	c.Subscribe(resource.EndpointType, v1, v2)
	c.WaitFor(resource.ClusterType, whole)

	dr := &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec: apinetworking.DestinationRule{
			Host: "reviews",
			TrafficPolicy: &apinetworking.TrafficPolicy{LoadBalancer: &apinetworking.LoadBalancerSettings{
				LbPolicy: &apinetworking.LoadBalancerSettings_Simple{Simple: apinetworking.LoadBalancerSettings_LEAST_REQUEST}}},
			Subsets: []*apinetworking.Subset{
				{Name: "v1", Labels: map[string]string{"version": "v1"}},
				{Name: "v2", Labels: map[string]string{"version": "v2"}},
			},
		},
	}
	rules, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := rules.NetworkingV1().DestinationRules(ns)
	if _, err := api.Create(ctx(t), dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(resource.ClusterType, whole, v1, v2)
	c.WaitFor(resource.EndpointType, v1, v2)
	for name, want := range map[string][]string{v1: {"192.0.2.1"}, v2: {"192.0.2.2", "192.0.2.3"}} {
		c.WaitUntil(name+" holds "+strings.Join(want, ","), func() bool {
			return slices.Equal(xdstest.Addresses(c.LoadAssignment(name)), want)
		})
	}
	if lb := c.Cluster(v2).GetLbPolicy().String(); lb != "LEAST_REQUEST" {
		t.Errorf("%s: lb_policy %s, want LEAST_REQUEST", v2, lb)
	}

	if err := api.Delete(ctx(t), "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The subset clusters leave the full-state CDS response; their
	// assignments are not resent (EDS is not full state), and a client
	// drops them with their clusters.
	c.WaitFor(resource.ClusterType, whole)
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
