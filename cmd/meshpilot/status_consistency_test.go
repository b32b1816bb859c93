package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/audit"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestStatusConsistency: `status consistency` prints each difference of
// /debug/consistencyz and a summary, and exits 3 only when there is one.
func TestStatusConsistency(t *testing.T) {
	since := time.Date(2026, 12, 1, 18, 2, 11, 0, time.UTC)
	listed := []audit.Listed{{Kind: "Service", Objects: 2, Pages: 1}, {Kind: "EndpointSlice", Objects: 3, Pages: 1}}
	for _, tc := range []struct {
		name     string
		report   audit.Report
		want     string
		wantCode int
	}{
		{"consistent", audit.Report{Took: "14ms", Listed: listed, Services: 2, Differences: []audit.Difference{}},
			"✔ The informer caches and the model match the API server: 5 objects of 2 kinds listed, 2 services rebuilt, in 14ms.\n", 0},
		{"a lost event", audit.Report{Took: "15ms", Listed: listed, Services: 2, Differences: []audit.Difference{
			{Kind: "EndpointSlice", Object: "shop/cart-a", Field: "metadata.resourceVersion", Cache: "1042", List: "1077", Since: since, Audits: 2},
			{Kind: "model.Endpoint", Object: "cart.shop.svc.cluster.local:8080", Field: "endpoint 192.0.2.1", Cache: "present", List: "absent", Since: since, Audits: 1},
			{Kind: "model.Service", Object: "new.shop.svc.cluster.local", Cache: "absent", List: "present", Since: since, Audits: 1},
		}},
			"KIND             OBJECT                             FIELD                      CACHE     LIST      SINCE\n" +
				"EndpointSlice    shop/cart-a                        metadata.resourceVersion   1042      1077      2026-12-01T18:02:11Z (2 audits)\n" +
				"model.Endpoint   cart.shop.svc.cluster.local:8080   endpoint 192.0.2.1         present   absent    2026-12-01T18:02:11Z (1 audit)\n" +
				"model.Service    new.shop.svc.cluster.local         -                          absent    present   2026-12-01T18:02:11Z (1 audit)\n" +
				"3 differences (EndpointSlice 1, model.Endpoint 1, model.Service 1); 5 objects of 2 kinds listed, 2 services rebuilt, in 15ms.\n" +
				"meshpilot: 3 differences between meshpilot and the API server\n", exitDifferences},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := debugPages(t, map[string]any{"/debug/consistencyz": tc.report})
			out, code := runStatus(t, "--server", url, "consistency")
			if out != tc.want || code != tc.wantCode {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d, output:\n%s", code, out, tc.wantCode, tc.want)
			}
		})
	}
	// Without a cluster (serve --from) the page is not found.
	out, code := runStatus(t, "--server", debugPages(t, nil), "consistency")
	if code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("without the page: exit %d, output:\n%s", code, out)
	}
}

// TestStatusConsistencyFromServe runs meshpilot serve with
// --audit-interval against a real API server: the periodic audits count
// in the metrics with no difference, and `status consistency` finds the
// caches and the model exact.
func TestStatusConsistencyFromServe(t *testing.T) {
	ns := env.Namespace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-a", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](9090)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.1"}}},
	})
	httpAddr := closedPort(t)
	p := start(t, nil, "serve", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--xds-addr", "127.0.0.1:0", "--http-addr", httpAddr, "--audit-interval", "300ms")
	server := "http://" + httpAddr

	testenv.Eventually(t, "two periodic audits without differences", func() (bool, string) {
		m := readPageOrEmpty(server + "/metrics")
		ok := strings.Contains(m, `meshpilot_audit_differences{kind="EndpointSlice"} 0`) &&
			strings.Contains(m, `meshpilot_audit_differences{kind="model.Endpoint"} 0`) &&
			!strings.Contains(m, "meshpilot_audit_runs_total 0") && !strings.Contains(m, "meshpilot_audit_runs_total 1\n")
		return ok, grepLines(m, "meshpilot_audit_")
	})
	out, code := runStatus(t, "--server", server, "consistency")
	if code != 0 || !strings.HasPrefix(out, "✔ The informer caches and the model match the API server: ") || !strings.Contains(out, "1 service rebuilt") {
		t.Fatalf("status consistency: exit %d, output:\n%s", code, out)
	}
	if strings.Contains(p.stderr.String(), "relisted") {
		t.Fatalf("a consistent cluster was relisted:\n%s", p.stderr.String())
	}
	p.interrupt()
}

// readPageOrEmpty reads a page, or returns "" while the server is not up.
func readPageOrEmpty(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out)
}
