package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestServeServesServiceEntries: meshpilot serve against a real API
// server with Istio's CRDs serves a ServiceEntry's host beside the
// Kubernetes Services, and a WorkloadEntry as an endpoint of the
// Kubernetes Service whose selector matches it, as serve wires the
// ServiceEntry registry after the Kubernetes one.
func TestServeServesServiceEntries(t *testing.T) {
	env.InstallIstioCRDs(t)
	ns := env.Namespace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "vm"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 7070}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)
	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns}}
	se.Spec.Hosts, se.Spec.Resolution = []string{"ext.example.com"}, apinetworking.ServiceEntry_STATIC
	se.Spec.Ports = []*apinetworking.ServicePort{{Number: 80, Protocol: "GRPC", Name: "grpc"}}
	se.Spec.Endpoints = []*apinetworking.WorkloadEntry{{Address: "10.9.0.1"}}
	if _, err := istio.NetworkingV1().ServiceEntries(ns).Create(ctx, se, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	we := &networkingv1.WorkloadEntry{ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: ns}}
	we.Spec.Address, we.Spec.Labels = "10.9.0.2", map[string]string{"app": "vm"}
	if _, err := istio.NetworkingV1().WorkloadEntries(ns).Create(ctx, we, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	f := statusFlags{server: httpAddr, timeout: 5 * time.Second}
	want := map[model.Hostname]string{"ext.example.com": "10.9.0.1", model.ServiceHostname("vm", ns, ""): "10.9.0.2"}
	testenv.Eventually(t, "the ServiceEntry's and the WorkloadEntry's endpoints on /debug/endpointz", func() (bool, string) {
		var eps []debug.ServiceEndpoints
		if err := getJSON(ctx, f, "/debug/endpointz", &eps); err != nil {
			return false, err.Error()
		}
		got := map[model.Hostname]string{}
		for _, s := range eps {
			for _, port := range s.Ports {
				for _, ep := range port.Endpoints {
					got[s.Hostname] = ep.Address
				}
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
	})
	var svcs []*model.Service
	if err := getJSON(ctx, f, "/debug/registryz", &svcs); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(svcs, func(s *model.Service) bool { return s.Hostname == "ext.example.com" && s.Namespace == ns }) {
		t.Fatalf("/debug/registryz has no ext.example.com: %+v", svcs)
	}
	p.interrupt()
}
