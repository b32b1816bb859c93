package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestStatusConfig: `status config` prints each problem of /debug/configz
// as istioctl analyze prints its messages (refusals first), then a
// summary, and exits 79 only when an object is refused.
func TestStatusConfig(t *testing.T) {
	ref := func(kind, name, where string) configstatus.Ref {
		return configstatus.Ref{Kind: kind, Namespace: "shop", Name: name, Where: where}
	}
	applied := configstatus.Entry{Ref: ref("DestinationRule", "cart", "")}
	refusedVS := configstatus.Entry{Ref: ref("VirtualService", "cart", ""), Status: configstatus.Refuse("spec.http[0].route", "weights add up to 90, not 100")}
	partial := configstatus.Entry{Ref: ref("VirtualService", "pay", "rules.yaml:12 (document 2)"), Status: configstatus.Status{
		IgnoredGRPC:  []configstatus.Field{{Path: "spec.http[1].mirror", Why: "gRPC clients cannot mirror; the VirtualService is not sent to them"}},
		IgnoredEnvoy: []configstatus.Field{{Path: "spec.http[0].fault.delay.exponentialDelay", Why: "deprecated, not translated"}},
	}}
	refusedDR := configstatus.Entry{Ref: ref("DestinationRule", "wild", ""), Status: configstatus.Status{
		Refused:     &configstatus.Field{Path: "spec.host", Why: "wildcard hosts are not served yet"},
		IgnoredGRPC: []configstatus.Field{{Path: "spec.trafficPolicy.loadBalancer.consistentHash.maglev", Why: "grpc-go has no Maglev; ring hash instead"}},
	}}
	conflict := debug.ServiceConflict{Hostname: "reviews.shop.svc.cluster.local", Served: "Kubernetes", DefinedBy: []string{"Kubernetes", "cluster-b"},
		Why: `ports differ; the first definition, Kubernetes's, is served: port 8080 is named "grpc" in Kubernetes, "http" in cluster-b: none of cluster-b's endpoints serve it`}
	for _, tc := range []struct {
		name      string
		entries   []configstatus.Entry
		conflicts []debug.ServiceConflict
		want      string
		wantCode  int
	}{
		{"no objects", nil, nil, "✔ No problems found in 0 Istio objects.\n", 0},
		{"all applied", []configstatus.Entry{applied}, nil, "✔ No problems found in 1 Istio object.\n", 0},
		{"fields ignored: information only", []configstatus.Entry{applied, partial}, nil,
			"Info [ignored-for-grpc] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[1].mirror: gRPC clients cannot mirror; the VirtualService is not sent to them\n" +
				"Info [ignored-for-envoy] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[0].fault.delay.exponentialDelay: deprecated, not translated\n" +
				"2 Istio objects: 0 refused, 1 partial, 1 applied.\n", 0},
		{"refused first", []configstatus.Entry{applied, refusedDR, refusedVS, partial}, nil,
			"Error [refused] (DestinationRule shop/wild) spec.host: wildcard hosts are not served yet\n" +
				"Error [refused] (VirtualService shop/cart) spec.http[0].route: weights add up to 90, not 100\n" +
				"Info [ignored-for-grpc] (DestinationRule shop/wild) spec.trafficPolicy.loadBalancer.consistentHash.maglev: grpc-go has no Maglev; ring hash instead\n" +
				"Info [ignored-for-grpc] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[1].mirror: gRPC clients cannot mirror; the VirtualService is not sent to them\n" +
				"Info [ignored-for-envoy] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[0].fault.delay.exponentialDelay: deprecated, not translated\n" +
				"4 Istio objects: 2 refused, 1 partial, 1 applied.\n" +
				"meshpilot: 2 objects refused: not applied, the last good version of each stays in force\n", exitRefused},
		{"one refused", []configstatus.Entry{refusedVS}, nil,
			"Error [refused] (VirtualService shop/cart) spec.http[0].route: weights add up to 90, not 100\n" +
				"1 Istio object: 1 refused, 0 partial, 0 applied.\n" +
				"meshpilot: 1 object refused: not applied, the last good version of each stays in force\n", exitRefused},
		{"ports that differ between clusters: a warning", []configstatus.Entry{applied}, []debug.ServiceConflict{conflict},
			"Warning [ports-differ] (Service reviews.shop.svc.cluster.local) spec.ports: " + conflict.Why + "\n" +
				"1 Istio object: 0 refused, 0 partial, 1 applied.\n" +
				"1 service with ports that differ between clusters: the first definition of each is served.\n", 0},
		{"warnings between errors and information", []configstatus.Entry{partial, refusedVS}, []debug.ServiceConflict{conflict},
			"Error [refused] (VirtualService shop/cart) spec.http[0].route: weights add up to 90, not 100\n" +
				"Warning [ports-differ] (Service reviews.shop.svc.cluster.local) spec.ports: " + conflict.Why + "\n" +
				"Info [ignored-for-grpc] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[1].mirror: gRPC clients cannot mirror; the VirtualService is not sent to them\n" +
				"Info [ignored-for-envoy] (VirtualService shop/pay rules.yaml:12 (document 2)) spec.http[0].fault.delay.exponentialDelay: deprecated, not translated\n" +
				"2 Istio objects: 1 refused, 1 partial, 0 applied.\n" +
				"1 service with ports that differ between clusters: the first definition of each is served.\n" +
				"meshpilot: 1 object refused: not applied, the last good version of each stays in force\n", exitRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := debugPages(t, map[string]any{"/debug/configz": debug.Configz{Objects: debug.ConfigObjects(tc.entries), ServiceConflicts: tc.conflicts}})
			out, code := runStatus(t, "--server", url, "config")
			if out != tc.want || code != tc.wantCode {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d, output:\n%s", code, out, tc.wantCode, tc.want)
			}
		})
	}
}

// TestStatusConfigFromServe runs meshpilot serve against a real API
// server with Istio's CRDs: a DestinationRule with a misplaced wildcard
// in its host and a VirtualService whose two destinations both have
// weight 0 show as refused on
// /debug/configz, in meshpilot_config_objects and in `status config`
// (exit 79), each logged once; fixing them applies them.
func TestStatusConfigFromServe(t *testing.T) {
	env.InstallIstioCRDs(t)
	ns := env.Namespace(t, nil)
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr)
	server := "http://" + httpAddr

	rules, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := rules.NetworkingV1().DestinationRules(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dr, err := api.Create(ctx, &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec:       apinetworking.DestinationRule{Host: "reviews.*.example.com"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route := func(weights ...int32) []*apinetworking.HTTPRoute {
		r := &apinetworking.HTTPRoute{}
		for _, w := range weights {
			r.Route = append(r.Route, &apinetworking.HTTPRouteDestination{Destination: &apinetworking.Destination{Host: "reviews"}, Weight: w})
		}
		return []*apinetworking.HTTPRoute{r}
	}
	vsAPI := rules.NetworkingV1().VirtualServices(ns)
	vs, err := vsAPI.Create(ctx, &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec:       apinetworking.VirtualService{Hosts: []string{"reviews"}, Http: route(0, 0)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// want waits until /debug/configz shows both objects in state, then
	// checks the metric.
	want := func(state string) {
		t.Helper()
		testenv.Eventually(t, "both objects "+state+" on /debug/configz", func() (bool, string) {
			var z debug.Configz
			if err := getJSON(ctx, statusFlags{server: server, timeout: 5 * time.Second}, "/debug/configz", &z); err != nil {
				return false, err.Error()
			}
			var got []string
			for _, o := range z.Objects {
				got = append(got, fmt.Sprintf("%s %s/%s %s", o.Kind, o.Namespace, o.Name, o.State))
			}
			want := []string{"DestinationRule " + ns + "/reviews " + state, "VirtualService " + ns + "/reviews " + state}
			return slices.Equal(got, want), fmt.Sprintf("%q", got)
		})
		m := readPage(t, server+"/metrics")
		for _, kind := range []string{"DestinationRule", "VirtualService"} {
			series := fmt.Sprintf(`meshpilot_config_objects{kind=%q,state=%q} 1`, kind, state)
			if !strings.Contains(m, series) {
				t.Errorf("/metrics has no %s", series)
			}
		}
	}

	want(configstatus.StateRefused)
	out, code := runStatus(t, "--server", server, "config")
	wantOut := fmt.Sprintf("Error [refused] (DestinationRule %[1]s/reviews) spec.host: a wildcard is allowed only as the whole first label (\"*.example.com\")\n"+
		"Error [refused] (VirtualService %[1]s/reviews) spec.http[0].route: the weights add up to 0: no destination would get a request\n"+
		"2 Istio objects: 2 refused, 0 partial, 0 applied.\n"+
		"meshpilot: 2 objects refused: not applied, the last good version of each stays in force\n", ns)
	if out != wantOut || code != exitRefused {
		t.Fatalf("status config: exit %d, output:\n%s\nwant exit %d, output:\n%s", code, out, exitRefused, wantOut)
	}
	p.waitStderr("field=spec.host")
	p.waitStderr("field=spec.http[0].route")
	if n := strings.Count(p.stderr.String(), "configuration refused"); n != 2 {
		t.Fatalf("%d refusals logged, want one per object:\n%s", n, p.stderr.String())
	}

	dr.Spec.Host = "reviews"
	if _, err := api.Update(ctx, dr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs.Spec.Http = route(60, 40)
	if _, err := vsAPI.Update(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(configstatus.StateApplied)
	testenv.Eventually(t, "both fixes logged", func() (bool, string) {
		return strings.Count(p.stderr.String(), "configuration applied after a refusal") == 2, p.stderr.String()
	})
	out, code = runStatus(t, "--server", server, "config")
	if out != "✔ No problems found in 2 Istio objects.\n" || code != 0 {
		t.Fatalf("status config after the fix: exit %d, output:\n%s", code, out)
	}
	p.interrupt()
}

func readPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
