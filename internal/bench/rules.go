package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With Config.TrafficRules every service has a DestinationRule with two
// subsets, v1 and v2 (its Pods alternate between the two versions), and a
// VirtualService that splits its traffic between them by weight, 80/20 at
// first. Clients then follow weighted routes to two subset clusters per
// service, and a route change sets new weights.

// initialV1Weight is the weight of subset v1 in every VirtualService as
// written first.
const initialV1Weight = 80

// podLabels are the labels of the n-th Pod, of svc.
func (w *workload) podLabels(svc *service, n int) map[string]string {
	labels := map[string]string{"app": svc.name}
	if w.cfg.TrafficRules {
		labels["version"] = "v" + strconv.Itoa(1+n%2)
	}
	return labels
}

// writeRules writes every service's DestinationRule and VirtualService.
func (w *workload) writeRules(ctx context.Context, ic istioclient.Interface) error {
	w.istio = ic
	return forEach(ctx, 2*len(w.services), w.cfg.Concurrency, func(ctx context.Context, i int) error {
		svc := w.services[i/2]
		if i%2 == 0 {
			dr := &networkingv1.DestinationRule{
				ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: svc.ns},
				Spec: apinetworking.DestinationRule{
					Host: svc.name,
					Subsets: []*apinetworking.Subset{
						{Name: "v1", Labels: map[string]string{"version": "v1"}},
						{Name: "v2", Labels: map[string]string{"version": "v2"}},
					},
				},
			}
			_, err := ic.NetworkingV1().DestinationRules(svc.ns).Create(ctx, dr, metav1.CreateOptions{})
			w.writes.Add(1)
			return wrap(err, "creating the DestinationRule of %s", svc.hostname)
		}
		vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: svc.name, Namespace: svc.ns}}
		vs.Spec.Hosts = []string{svc.name}
		vs.Spec.Http = splitRoute(svc.name, initialV1Weight)
		out, err := ic.NetworkingV1().VirtualServices(svc.ns).Create(ctx, vs, metav1.CreateOptions{})
		w.writes.Add(1)
		if err != nil {
			return wrap(err, "creating the VirtualService of %s", svc.hostname)
		}
		svc.mu.Lock()
		svc.vs, svc.v1Weight = out, initialV1Weight
		svc.mu.Unlock()
		return nil
	})
}

// splitRoute is one route sending v1Weight % of the traffic to subset v1
// of host and the rest to v2.
func splitRoute(host string, v1Weight uint32) []*apinetworking.HTTPRoute {
	return []*apinetworking.HTTPRoute{{
		Route: []*apinetworking.HTTPRouteDestination{
			{Destination: &apinetworking.Destination{Host: host, Subset: "v1"}, Weight: int32(v1Weight)},
			{Destination: &apinetworking.Destination{Host: host, Subset: "v2"}, Weight: int32(100 - v1Weight)},
		},
	}}
}

// nextV1Weight is the weight a route change gives subset v1: never the
// current one, so that every change is one a client can tell apart.
func nextV1Weight(cur uint32) uint32 {
	if cur >= 95 {
		return 51
	}
	return cur + 1
}

// routeKey names what a client holds for a route configuration whose
// first weighted route splits by weights: the key of a route change.
func routeKey(name string, weights []uint32) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('#')
	for i, w := range weights {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(w), 10))
	}
	return b.String()
}

// expectedSplitKey is the key clients of svc hold once they have the
// route with v1Weight.
func expectedSplitKey(svc *service, v1Weight uint32) string {
	return routeKey(fmt.Sprintf("outbound|%d||%s", ServicePort, svc.hostname), []uint32{v1Weight, 100 - v1Weight})
}

// setWeights writes svc's VirtualService with the next weights. before is
// called, with the key clients will hold, just before the write; written
// is when the write returned.
func (w *workload) setWeights(ctx context.Context, svc *service, before func(key string)) (written time.Time, err error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	weight := nextV1Weight(svc.v1Weight)
	before(expectedSplitKey(svc, weight))
	vss := w.istio.NetworkingV1().VirtualServices(svc.ns)
	for attempt := 0; ; attempt++ {
		next := svc.vs.DeepCopy()
		next.Spec.Http = splitRoute(svc.name, weight)
		out, err := vss.Update(ctx, next, metav1.UpdateOptions{})
		w.writes.Add(1)
		if err == nil {
			svc.vs, svc.v1Weight = out, weight
			return time.Now(), nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return time.Time{}, wrap(err, "updating the VirtualService of %s", svc.hostname)
		}
		cur, gerr := vss.Get(ctx, svc.vs.Name, metav1.GetOptions{})
		if gerr != nil {
			return time.Time{}, wrap(gerr, "reading the VirtualService of %s", svc.hostname)
		}
		svc.vs = cur
	}
}
