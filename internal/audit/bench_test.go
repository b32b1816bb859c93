package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

const (
	benchServices  = 1000
	benchEndpoints = 10 // per service, in one slice
)

func setUpBenchCluster(b *testing.B) *kube.Controller {
	b.Helper()
	ns := env.Namespace(b, nil)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubeapi.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan int)
	errs := make(chan error, benchServices)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("svc-%04d", i)
				_, err := client.Services(ns).Create(context.Background(), &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{httpPort}},
				}, metav1.CreateOptions{})
				if err == nil {
					addrs := make([]string, benchEndpoints)
					for j := range addrs {
						k := i*benchEndpoints + j
						addrs[j] = fmt.Sprintf("10.200.%d.%d", k/256, k%256)
					}
					_, err = client.EndpointSlices(ns).Create(context.Background(), endpointSlice(ns, name+"-a", name, addrs...), metav1.CreateOptions{})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range benchServices {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	c := startRegistry(b, client, ns)
	testenv.Eventually(b, "the model built", func() (bool, string) {
		s, e := c.Len()
		return s == benchServices && e == benchServices*benchEndpoints, fmt.Sprintf("%d services, %d endpoints", s, e)
	})
	return c
}

// BenchmarkAudit measures one audit of 1000 services of 10 endpoints
// each (1000 Services and 1000 EndpointSlices in one namespace, no Pods):
// "full" lists every kind from the real API server and compares; "compare"
// is the work done in meshpilot alone (rebuilding the model from the
// listed objects and comparing caches and models).
func BenchmarkAudit(b *testing.B) {
	c := setUpBenchCluster(b)
	a, err := New(Options{Registry: c})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		var rep Report
		for b.Loop() {
			if rep, err = a.Audit(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		if len(rep.Differences) != 0 || rep.Services != benchServices {
			b.Fatalf("%d services rebuilt, differences:\n%s", rep.Services, summary(rep.Differences))
		}
	})
	b.Run("compare", func(b *testing.B) {
		listed := map[string][]any{}
		for _, kind := range kube.Kinds {
			objs, _, err := a.list(context.Background(), c, kind)
			if err != nil {
				b.Fatal(err)
			}
			listed[kind] = objs
		}
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for _, kind := range kube.Kinds {
				n += len(compareObjects(kind, c.Cached(kind), listed[kind]))
			}
			rebuilt, err := c.ModelFrom(listed)
			if err != nil {
				b.Fatal(err)
			}
			n += len(compareModels(c, rebuilt))
			if n != 0 {
				b.Fatalf("%d differences", n)
			}
		}
	})
}
