package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestRoutesAsIstiodServesThem: a real grpc-go client routed by
// VirtualServices gets what istiod's routes make it do: weights relative
// to their total, a route that mirrors still pinned to its subset (only
// the mirror is left out) beside a redirect route that fails the RPCs it
// matches, and of two VirtualServices of the namespace for one host the
// older one.
func TestRoutesAsIstiodServesThem(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.111", "127.0.0.112")
	v1, v2 := bs[0], bs[1]
	createService(t, ns, "reviews", 9080)
	versionedBackends(t, ns, "reviews", bs, "v1", "v2")
	istio := startIstio(t, ns)
	istio.destinationRule(t, "reviews", versionSubsets)
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///reviews:9080", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, v1, v2)
	statusOf := func(name string) configstatus.Status {
		st, _ := istio.status.Get(configstatus.Ref{Kind: "VirtualService", Namespace: ns, Name: name})
		return st
	}

	t.Run("weights 3 and 1 split 75/25 over 2000 RPCs", func(t *testing.T) {
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}`)
		grpctest.AwaitSpread(t, cc, v2)
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 3}
    - {destination: {host: reviews, subset: v2}, weight: 1}`)
		grpctest.AwaitSpread(t, cc, v1, v2)
		const n = 2000
		counts := grpctest.CountRPCs(t, cc, n)
		share := float64(counts[v1.Addr]) / n
		t.Logf("v1 served %d of %d RPCs (%.1f%%), v2 %d", counts[v1.Addr], n, 100*share, counts[v2.Addr])
		if share < 0.70 || share > 0.80 || counts[v1.Addr]+counts[v2.Addr] != n {
			t.Errorf("v1 served %.1f%% of the RPCs (counts %v), want 75%% ± 5", 100*share, counts)
		}
		if st := statusOf("reviews"); !st.OK() {
			t.Errorf("status %+v, want applied", st)
		}
	})

	t.Run("a mirror keeps its route pinned; a redirect fails only what it matches", func(t *testing.T) {
		// From every RPC on v2 to every RPC on v1: a round all on v1 is
		// the mirroring route in force, never the split's luck.
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}`)
		grpctest.AwaitSpread(t, cc, v2)
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - match:
    - headers:
        x-redirect: {exact: "1"}
    redirect: {uri: /elsewhere}
  - route:
    - destination: {host: reviews, subset: v1}
    mirror: {host: reviews, subset: v2}
    mirrorPercentage: {value: 100}`)
		grpctest.AwaitSpread(t, cc, v1)
		if counts := grpctest.CountRPCs(t, cc, 200); counts[v1.Addr] != 200 {
			t.Errorf("RPCs served %v, want all 200 by v1", counts)
		}
		redirected := metadata.AppendToOutgoingContext(context.Background(), "x-redirect", "1")
		if _, err := grpctest.Call(redirected, cc); status.Code(err) != codes.Unavailable {
			t.Errorf("an RPC the redirect matches ended with %v, want UNAVAILABLE (grpc-go cannot redirect)", err)
		}
		testenv.Eventually(t, "the mirror and the redirect reported for gRPC", func() (bool, string) {
			st := statusOf("reviews")
			var paths []string
			for _, f := range st.IgnoredGRPC {
				paths = append(paths, f.Path)
			}
			return slices.Equal(paths, []string{"spec.http[0].redirect", "spec.http[1].mirror"}), fmt.Sprintf("%+v", st)
		})
	})

	t.Run("of two VirtualServices for one host the older routes it", func(t *testing.T) {
		if err := istio.client.NetworkingV1().VirtualServices(ns).Delete(ctx(t), "reviews", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, cc, v1, v2)
		istio.virtualService(t, "b", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}`)
		grpctest.AwaitSpread(t, cc, v2)
		// creationTimestamp is whole seconds: a is younger than b.
		time.Sleep(1100 * time.Millisecond)
		istio.virtualService(t, "a", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}`)
		testenv.Eventually(t, "a refused for the older b", func() (bool, string) {
			st := statusOf("a")
			return st.Refused != nil && st.Refused.Path == "spec.hosts[0]", fmt.Sprintf("%+v", st)
		})
		if counts := grpctest.CountRPCs(t, cc, 100); counts[v2.Addr] != 100 {
			t.Errorf("RPCs served %v, want all 100 by v2 (b's route)", counts)
		}
	})

	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestSourceLabelsWithGRPCClients: a route whose match names
// sourceLabels takes only the RPCs of clients with those labels: a
// client whose node says them (metadata LABELS), and one whose Pod has
// them though its node says nothing; a client with other labels gets the
// next route.
func TestSourceLabelsWithGRPCClients(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.113", "127.0.0.114")
	v1, v2 := bs[0], bs[1]
	createService(t, ns, "reviews", 9080)
	versionedBackends(t, ns, "reviews", bs, "v1", "v2")
	// The Pod of the third client, at a documentation address (its node
	// id's) that no backend uses.
	const podIP = "192.0.2.213"
	env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tester", Namespace: ns, Labels: map[string]string{"app": "tester"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}, podIP)
	istio := startIstio(t, ns)
	istio.destinationRule(t, "reviews", versionSubsets)
	istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - match:
    - sourceLabels: {app: tester}
    route:
    - destination: {host: reviews, subset: v2}
  - route:
    - destination: {host: reviews, subset: v1}`)
	srv := istio.serve(t)
	channel := func(o grpctest.ChannelOptions) *grpc.ClientConn {
		o.Namespace, o.MapAddress = ns, grpctest.DocToLoopback
		return grpctest.Channel(t, srv.XDSAddr(), "xds:///reviews:9080", o)
	}
	byNode := channel(grpctest.ChannelOptions{Labels: map[string]string{"app": "tester", "version": "v3"}})
	byPod := channel(grpctest.ChannelOptions{IP: podIP})
	other := channel(grpctest.ChannelOptions{Labels: map[string]string{"app": "web"}})
	grpctest.AwaitSpread(t, byNode, v2)
	grpctest.AwaitSpread(t, byPod, v2)
	grpctest.AwaitSpread(t, other, v1)
	for name, cc := range map[string]*grpc.ClientConn{"LABELS": byNode, "its Pod": byPod} {
		if counts := grpctest.CountRPCs(t, cc, 50); counts[v2.Addr] != 50 {
			t.Errorf("the client labelled by %s: RPCs served %v, want all 50 by v2", name, counts)
		}
	}
	if counts := grpctest.CountRPCs(t, other, 50); counts[v1.Addr] != 50 {
		t.Errorf("the other client: RPCs served %v, want all 50 by v1", counts)
	}
	if st, _ := istio.status.Get(configstatus.Ref{Kind: "VirtualService", Namespace: ns, Name: "reviews"}); !st.OK() {
		t.Errorf("status %+v, want applied in full", st)
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestWorkloadSelectorRuleWithGRPCClients: a DestinationRule with a
// workloadSelector applies to the matching clients of its namespace
// only: its subset v1 (the v2 Pod) for a client labelled app=tester,
// while another client keeps the plain rule's v1, which the selector
// rule, first by name, neither refuses nor hides.
func TestWorkloadSelectorRuleWithGRPCClients(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.115", "127.0.0.116")
	v1, v2 := bs[0], bs[1]
	createService(t, ns, "reviews", 9080)
	versionedBackends(t, ns, "reviews", bs, "v1", "v2")
	istio := startIstio(t, ns)
	istio.destinationRule(t, "reviews", versionSubsets)
	istio.destinationRule(t, "a-testers", `  host: reviews
  workloadSelector: {matchLabels: {app: tester}}
  subsets:
  - {name: v1, labels: {version: v2}}`)
	istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}`)
	srv := istio.serve(t)
	channel := func(labels map[string]string) *grpc.ClientConn {
		return grpctest.Channel(t, srv.XDSAddr(), "xds:///reviews:9080", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback, Labels: labels})
	}
	tester, other := channel(map[string]string{"app": "tester"}), channel(map[string]string{"app": "web"})
	grpctest.AwaitSpread(t, tester, v2)
	grpctest.AwaitSpread(t, other, v1)
	if counts := grpctest.CountRPCs(t, other, 50); counts[v1.Addr] != 50 {
		t.Errorf("the other client: RPCs served %v, want all 50 by v1", counts)
	}
	for _, name := range []string{"reviews", "a-testers"} {
		if st, _ := istio.status.Get(configstatus.Ref{Kind: "DestinationRule", Namespace: ns, Name: name}); st.Refused != nil {
			t.Errorf("%s refused: %+v", name, st.Refused)
		}
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
