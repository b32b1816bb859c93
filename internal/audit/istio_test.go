package audit

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestLostIstioEventIsFoundAndRepaired drops one VirtualService MODIFIED
// event between the API server and the Istio registry: the audit lists
// the Istio kinds whose CRDs are installed beside the Kubernetes ones,
// reports the VirtualService's resourceVersion, and the periodic audit
// relists VirtualServices, after which the registry holds the new spec.
func TestLostIstioEventIsFoundAndRepaired(t *testing.T) {
	env.InstallIstioCRDs(t)
	ns := env.Namespace(t, nil)
	proxy := newDropProxy(t, env.Config)
	client, err := kubeapi.NewForConfig(proxy.config())
	if err != nil {
		t.Fatal(err)
	}
	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vs := &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
		Spec:       apinetworking.VirtualService{Hosts: []string{"reviews"}, Http: []*apinetworking.HTTPRoute{{Timeout: durationpb.New(time.Second)}}},
	}
	if vs, err = istio.NetworkingV1().VirtualServices(ns).Create(ctx(t), vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := startRegistry(t, client, ns)
	rules, err := crd.NewForConfig(proxy.config(), crd.Options{Namespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, rules.Run)
	testenv.Eventually(t, "the VirtualService cached", func() (bool, string) {
		return rules.HasSynced() && rules.VirtualService(ns, "reviews") != nil, "not yet"
	})

	proxy.arm(dropRule{resource: "virtualservices", eventType: "MODIFIED", name: "reviews"})
	vs.Spec.Http[0].Timeout = durationpb.New(2 * time.Second)
	if _, err := istio.NetworkingV1().VirtualServices(ns).Update(ctx(t), vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the MODIFIED event dropped", func() (bool, string) {
		return len(proxy.droppedEvents()) == 1, "nothing dropped yet"
	})

	logs := &logBuffer{}
	a, err := New(Options{Registry: c, Sources: []Source{rules}, Interval: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Audit(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(rep.Differences), "VirtualService "+ns+"/reviews metadata.resourceVersion"; got != want {
		t.Fatalf("differences:\n%s\nwant:\n%s", got, want)
	}
	var kinds []string
	for _, l := range rep.Listed {
		kinds = append(kinds, l.Kind)
	}
	if want := []string{"Service", "EndpointSlice", "Pod", "Node", "Namespace", "DestinationRule", "VirtualService", "ServiceEntry", "WorkloadEntry", "PeerAuthentication", "AuthorizationPolicy"}; !slices.Equal(kinds, want) {
		t.Fatalf("listed %v, want %v", kinds, want)
	}
	if l := listedOf(rep, "VirtualService"); l.Objects != 1 {
		t.Fatalf("VirtualServices listed: %+v", l)
	}

	runUntilEnd(t, a.Run)
	testenv.Eventually(t, "the relist logged", func() (bool, string) {
		return strings.Contains(logs.String(), "relisted VirtualServices: 1 difference outlived two audits"), logs.String()
	})
	testenv.Eventually(t, "the new spec cached", func() (bool, string) {
		got := rules.VirtualService(ns, "reviews")
		return got != nil && got.Spec.Http[0].Timeout.GetSeconds() == 2, fmt.Sprint(got)
	})
	testenv.Eventually(t, "an audit without differences", func() (bool, string) {
		rep, err := a.Audit(ctx(t))
		if err != nil {
			return false, err.Error()
		}
		return len(rep.Differences) == 0, summary(rep.Differences)
	})
}
