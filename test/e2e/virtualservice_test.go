package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// istioRules runs the Istio registry of ns with the DestinationRule and
// VirtualService views, as meshpilot serve wires them, and applies rules
// to the API server. The Istio CRDs are installed first.
type istioRules struct {
	ns       string
	policies *crd.Policies
	routes   *crd.Routes
	status   *configstatus.Reporter
	client   istioclient.Interface
}

func startIstio(t *testing.T, ns string) *istioRules {
	t.Helper()
	r := &istioRules{ns: ns, status: configstatus.NewReporter()}
	runIstio(t, ns, func(store crd.Store) {
		r.policies = crd.NewPolicies(store, crd.PolicyOptions{RootNamespace: "istio-system", Status: r.status})
		r.routes = crd.NewRoutes(store, crd.RouteOptions{Policies: r.policies, Status: r.status})
	})
	client, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	r.client = client
	return r
}

// serve runs meshpilot on ns with the rules' views.
func (r *istioRules) serve(t *testing.T) *running {
	t.Helper()
	return startObserved(t, r.ns, server.Options{Policies: r.policies, Routes: r.routes})
}

// destinationRule creates a DestinationRule from its spec in YAML.
func (r *istioRules) destinationRule(t *testing.T, name, spec string) {
	t.Helper()
	var dr networkingv1.DestinationRule
	if err := yaml.UnmarshalStrict([]byte("spec:\n"+spec), &dr); err != nil {
		t.Fatal(err)
	}
	dr.Name, dr.Namespace = name, r.ns
	if _, err := r.client.NetworkingV1().DestinationRules(r.ns).Create(ctx(t), &dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// virtualService creates a VirtualService from its spec in YAML, or
// replaces the spec of the one of that name.
func (r *istioRules) virtualService(t *testing.T, name, spec string) {
	t.Helper()
	var vs networkingv1.VirtualService
	if err := yaml.UnmarshalStrict([]byte("spec:\n"+spec), &vs); err != nil {
		t.Fatal(err)
	}
	api := r.client.NetworkingV1().VirtualServices(r.ns)
	cur, err := api.Get(ctx(t), name, metav1.GetOptions{})
	if err == nil {
		cur.Spec = *vs.Spec.DeepCopy()
		if _, err := api.Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	vs.Name, vs.Namespace = name, r.ns
	if _, err := api.Create(ctx(t), &vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// versionedBackends runs the Pods of a service's backends, each labelled
// with its version, and the slice that lists them, as the EndpointSlice
// controller would write it.
func versionedBackends(t *testing.T, ns, service string, backends []grpctest.Backend, versions ...string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(backends[0].Port))}},
	}
	for i, b := range backends {
		name := service + "-" + versions[i] + "-" + strconv.Itoa(i)
		env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": service, "version": versions[i]}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
		}, docAddr(b))
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{docAddr(b)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name},
		})
	}
	env.ApplyEndpointSlice(t, slice)
}

const versionSubsets = `  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}`

// TestVirtualServiceWithGRPCClients: VirtualServices applied to a real
// API server steer a grpc-go xDS client's RPCs between the subsets of a
// DestinationRule (by weight, by header), and inject delays and aborts.
func TestVirtualServiceWithGRPCClients(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.61", "127.0.0.62")
	v1, v2 := bs[0], bs[1]
	createService(t, ns, "reviews", 9080)
	versionedBackends(t, ns, "reviews", bs, "v1", "v2")
	istio := startIstio(t, ns)
	istio.destinationRule(t, "reviews", versionSubsets)
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///reviews:9080", grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, v1, v2)

	t.Run("weights split 80/20 over 2000 RPCs", func(t *testing.T) {
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 100}`)
		grpctest.AwaitSpread(t, cc, v1)
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 80}
    - {destination: {host: reviews, subset: v2}, weight: 20}`)
		grpctest.AwaitSpread(t, cc, v1, v2)
		const n = 2000
		counts := grpctest.CountRPCs(t, cc, n)
		share := float64(counts[v1.Addr]) / n
		t.Logf("v1 served %d of %d RPCs (%.1f%%), v2 %d", counts[v1.Addr], n, 100*share, counts[v2.Addr])
		if share < 0.75 || share > 0.85 || counts[v1.Addr]+counts[v2.Addr] != n {
			t.Errorf("v1 served %.1f%% of the RPCs (counts %v), want 80%% ± 5", 100*share, counts)
		}
	})

	t.Run("a header routes to a subset", func(t *testing.T) {
		// From every RPC on v2 to untagged RPCs on v1: a round of them
		// all on v1 is the header route in force, never the split's luck.
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v2}`)
		grpctest.AwaitSpread(t, cc, v2)
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - match:
    - headers:
        x-version: {exact: v2}
    route:
    - destination: {host: reviews, subset: v2}
  - route:
    - destination: {host: reviews, subset: v1}`)
		grpctest.AwaitSpread(t, cc, v1)
		tagged := metadata.AppendToOutgoingContext(context.Background(), "x-version", "v2")
		for range 20 {
			if addr, err := grpctest.Call(tagged, cc); err != nil || addr != v2.Addr {
				t.Fatalf("an RPC with x-version: v2 went to %s (error %v), want %s", addr, err, v2.Addr)
			}
		}
	})

	t.Run("a fixed delay and an abort with a gRPC status", func(t *testing.T) {
		const delay = 300 * time.Millisecond
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - match:
    - headers:
        x-fault: {exact: delay}
    fault:
      delay: {fixedDelay: 300ms, percentage: {value: 100}}
    route:
    - destination: {host: reviews, subset: v2}
  - match:
    - headers:
        x-fault: {exact: abort}
    fault:
      abort: {grpcStatus: PERMISSION_DENIED, percentage: {value: 100}}
    route:
    - destination: {host: reviews, subset: v2}
  - route:
    - destination: {host: reviews, subset: v2}`)
		grpctest.AwaitSpread(t, cc, v2)
		aborted := metadata.AppendToOutgoingContext(context.Background(), "x-fault", "abort")
		_, err := grpctest.Call(aborted, cc)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("an RPC with x-fault: abort ended with %v, want PERMISSION_DENIED", err)
		}
		delayed := metadata.AppendToOutgoingContext(context.Background(), "x-fault", "delay")
		start := time.Now()
		addr, err := grpctest.Call(delayed, cc)
		if took := time.Since(start); err != nil || took < delay || addr != v2.Addr {
			t.Errorf("an RPC with x-fault: delay took %v, went to %s, error %v; want at least %v to %s", took, addr, err, delay, v2.Addr)
		}
	})

	t.Run("grpc-go skips a query match, the other routes apply", func(t *testing.T) {
		istio.virtualService(t, "reviews", `  hosts: [reviews]
  http:
  - match:
    - queryParams:
        debug: {exact: "1"}
    route:
    - destination: {host: reviews, subset: v2}
  - route:
    - destination: {host: reviews, subset: v1}`)
		// From every RPC on v2 to every RPC on v1, as istiod's routes
		// make it: grpc-go skips the route with a query match.
		grpctest.AwaitSpread(t, cc, v1)
		testenv.Eventually(t, "the VirtualService reported partial", func() (bool, string) {
			st, _ := istio.status.Get(configstatus.Ref{Kind: "VirtualService", Namespace: ns, Name: "reviews"})
			e := configstatus.Entry{Status: st}
			return e.State() == "partial" && len(st.IgnoredGRPC) == 1 && st.IgnoredGRPC[0].Path == "spec.http[0].match[0].queryParams",
				fmt.Sprintf("%+v", st)
		})
	})

	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestVirtualServiceRetries: a server failing every first attempt with
// UNAVAILABLE: a route with retries off gives the client that error, one
// retrying UNAVAILABLE turns it into a success.
func TestVirtualServiceRetries(t *testing.T) {
	ns := env.Namespace(t, nil)
	flaky := grpctest.StartFirstAttemptFails(t, "127.0.0.63")
	createService(t, ns, "flaky", int32(flaky.Port))
	writeSlice(t, ns, "flaky", []grpctest.Backend{flaky.Backend})
	istio := startIstio(t, ns)
	istio.virtualService(t, "flaky", `  hosts: [flaky]
  http:
  - route:
    - destination: {host: flaky}
    retries: {attempts: 0}`)
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///flaky:"+strconv.Itoa(int(flaky.Port)), grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	awaitCode(t, cc, codes.Unavailable)
	istio.virtualService(t, "flaky", `  hosts: [flaky]
  http:
  - route:
    - destination: {host: flaky}
    retries: {attempts: 2, retryOn: unavailable}`)
	awaitCode(t, cc, codes.OK)
	failed, served := flaky.Counts()
	if failed == 0 || served == 0 {
		t.Fatalf("first attempts failed %d, retries served %d: want both", failed, served)
	}
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// TestVirtualServiceTimeout: a server answering after 2s: a route's
// 200ms timeout ends the client's RPCs with DEADLINE_EXCEEDED (the
// client's own deadline is 5s). A fault delay does not count against it
// in grpc-go, so a slow server it is.
func TestVirtualServiceTimeout(t *testing.T) {
	ns := env.Namespace(t, nil)
	slow := grpctest.StartSlow(t, "127.0.0.64", 2*time.Second)
	createService(t, ns, "slow", int32(slow.Port))
	writeSlice(t, ns, "slow", []grpctest.Backend{slow.Backend})
	istio := startIstio(t, ns)
	istio.virtualService(t, "slow", `  hosts: [slow]
  http:
  - route:
    - destination: {host: slow}
    timeout: 200ms`)
	srv := istio.serve(t)
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///slow:"+strconv.Itoa(int(slow.Port)), grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	awaitCode(t, cc, codes.DeadlineExceeded)
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}

// awaitCode makes RPCs until one ends with code.
func awaitCode(t *testing.T, cc *grpc.ClientConn, code codes.Code) {
	t.Helper()
	deadline := time.Now().Add(grpctest.Wait)
	var err error
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = healthpb.NewHealthClient(cc).Check(c, &healthpb.HealthCheckRequest{})
		cancel()
		if status.Code(err) == code {
			return
		}
		time.Sleep(20 * time.Millisecond) // between polling RPCs
	}
	t.Fatalf("RPCs never ended with %v; last error %v", code, err)
}
