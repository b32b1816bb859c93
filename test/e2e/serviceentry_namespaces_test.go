package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/registry/serviceentry"
	"github.com/meshpilot/meshpilot/internal/server"
)

// TestServiceEntryHostOfTwoNamespaces: two namespaces each define one
// external host with a ServiceEntry of their own; each namespace's grpc-go
// clients reach their own definition's endpoints, as under istiod, and a
// third namespace sees what is exported to it: nothing while both are
// private, the public one once one is exported to all, which a namespace
// with a private definition still does not get.
func TestServiceEntryHostOfTwoNamespaces(t *testing.T) {
	nsA, nsB, nsC := env.Namespace(t, nil), env.Namespace(t, nil), env.Namespace(t, nil)
	ba := grpctest.StartBackend(t, "127.0.0.211", 0)
	bb := grpctest.StartBackend(t, "127.0.0.212", 0)
	all := []string{nsA, nsB, nsC}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := kube.New(env.API, kube.Options{Namespaces: all, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	env.InstallIstioCRDs(t)
	reg, err := crd.NewForConfig(env.Config, crd.Options{Namespaces: all, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	status := configstatus.NewReporter()
	se := serviceentry.New(reg, serviceentry.Options{Services: k, Pods: k, Reporter: status})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("istio registry: %v", err)
		}
	})
	srv := startObserved(t, nsA, server.Options{Sources: []aggregate.Source{
		{Name: "kubernetes", Controller: k}, {Name: "serviceentries", Controller: se},
	}})
	istio, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(ns, exportTo string, b grpctest.Backend) {
		t.Helper()
		obj := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}}
		spec := fmt.Sprintf("hosts: [api.example.com]\nexportTo: [%q]\nresolution: STATIC\n"+
			"ports: [{number: 7070, name: grpc, protocol: GRPC, targetPort: %d}]\nendpoints: [{address: %s}]", exportTo, b.Port, b.IP)
		if err := yaml.Unmarshal([]byte(spec), &obj.Spec); err != nil {
			t.Fatal(err)
		}
		api := istio.NetworkingV1().ServiceEntries(ns)
		if old, err := api.Get(ctx(t), "api", metav1.GetOptions{}); err == nil {
			obj.ResourceVersion = old.ResourceVersion
			_, err = api.Update(ctx(t), obj, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := api.Create(ctx(t), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const target = "xds:///api.example.com:7070"
	client := func(ns string) *grpc.ClientConn {
		return grpctest.Channel(t, srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	}

	apply(nsA, ".", ba)
	apply(nsB, ".", bb)
	a, b, c := client(nsA), client(nsB), client(nsC)
	grpctest.AwaitSpread(t, a, ba)
	grpctest.AwaitSpread(t, b, bb)
	grpctest.AwaitUnavailable(t, c)
	for _, ns := range []string{nsA, nsB} {
		if st, _ := status.Get(configstatus.Ref{Kind: "ServiceEntry", Namespace: ns, Name: "api"}); !st.OK() {
			t.Errorf("%s's ServiceEntry reported %+v: both are served", ns, st)
		}
	}

	// B's definition made public: C gets it; A keeps its own private one.
	apply(nsB, "*", bb)
	grpctest.AwaitSpread(t, c, bb)
	grpctest.AwaitSpread(t, a, ba)
	grpctest.AwaitSpread(t, b, bb)

	// A's definition gone: A's clients get the public one.
	if err := istio.NetworkingV1().ServiceEntries(nsA).Delete(ctx(t), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	grpctest.AwaitSpread(t, a, bb)
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
