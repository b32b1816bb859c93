package e2e

import (
	"slices"
	"testing"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshpilot/meshpilot/internal/grpctest"
)

// TestClientsGetTheirZoneAndNode: a Service's trafficDistribution and
// internalTrafficPolicy, read from a real API server, steer real grpc-go
// clients by where they run. The clients' bootstraps say nothing of their
// node or zone: meshpilot finds their Pods by address, and the Pods'
// Nodes give the zone.
func TestClientsGetTheirZoneAndNode(t *testing.T) {
	ns := env.Namespace(t, nil)
	nodeA, nodeB := ns+"-node-a", ns+"-node-b"
	createNode(t, nodeA, "a")
	createNode(t, nodeB, "b")
	bs := grpctest.StartBackends(t, "127.0.0.51", "127.0.0.52")
	inA, inB := bs[0], bs[1]
	createRunningPod(t, ns, "backend-a", docAddr(inA), nodeA)
	createRunningPod(t, ns, "backend-b", docAddr(inB), nodeB)
	createRunningPod(t, ns, "client-a", "192.0.2.61", nodeA)
	createRunningPod(t, ns, "client-b", "192.0.2.62", nodeB)

	svcs := env.Client.CoreV1().Services(ns)
	svc, err := svcs.Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Ports:               []corev1.ServicePort{{Name: "grpc", Port: 7070}},
			TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferSameZone),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// notReady names the backend Pods whose endpoint is not ready.
	writePodSlice := func(notReady ...string) {
		t.Helper()
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "echo-slice", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(inA.Port))}},
		}
		for _, b := range []struct {
			backend grpctest.Backend
			pod     string
		}{{inA, "backend-a"}, {inB, "backend-b"}} {
			ready := !slices.Contains(notReady, b.pod)
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{docAddr(b.backend)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: b.pod},
			})
		}
		env.ApplyEndpointSlice(t, s)
	}
	writePodSlice()
	srv := startMeshpilot(t, ns)
	channel := func(ip string) *grpc.ClientConn {
		return grpctest.Channel(t, srv.XDSAddr(), "xds:///echo:7070",
			grpctest.ChannelOptions{Namespace: ns, IP: ip, MapAddress: grpctest.DocToLoopback})
	}
	clientA, clientB := channel("192.0.2.61"), channel("192.0.2.62")

	t.Run("PreferSameZone: each client its zone", func(t *testing.T) {
		grpctest.AwaitSpread(t, clientA, inA)
		grpctest.AwaitSpread(t, clientB, inB)
	})
	t.Run("PreferSameZone: a zone with nothing ready fails over", func(t *testing.T) {
		writePodSlice("backend-b")
		grpctest.AwaitSpread(t, clientB, inA)
		writePodSlice()
		grpctest.AwaitSpread(t, clientB, inB)
	})
	t.Run("internalTrafficPolicy Local: the client's node only", func(t *testing.T) {
		cur, err := svcs.Get(ctx(t), svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.TrafficDistribution = nil
		cur.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		if _, err := svcs.Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, clientA, inA)
		grpctest.AwaitSpread(t, clientB, inB)
		// Node b's endpoint not ready: client b gets nothing, not node
		// a's endpoint.
		writePodSlice("backend-b")
		grpctest.AwaitUnavailable(t, clientB)
		grpctest.AwaitSpread(t, clientA, inA)
	})
	t.Run("no preference: both everywhere", func(t *testing.T) {
		cur, err := svcs.Get(ctx(t), svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		if _, err := svcs.Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		writePodSlice()
		grpctest.AwaitSpread(t, clientA, inA, inB)
		grpctest.AwaitSpread(t, clientB, inA, inB)
	})
}

func createNode(t *testing.T, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: zone,
	}}}
	if _, err := env.Client.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(ctx(t), name, metav1.DeleteOptions{}) })
}

// createRunningPod creates a running, ready Pod on a node, at ip.
func createRunningPod(t *testing.T, ns, name, ip, node string) {
	t.Helper()
	env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}},
		},
	}, ip)
}
