package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	apinetworking "istio.io/api/networking/v1alpha3"
	apisecurity "istio.io/api/security/v1beta1"
	apitype "istio.io/api/type/v1beta1"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testpki"
)

// securedMesh is a namespace with meshpilot serving its DestinationRules,
// PeerAuthentications and AuthorizationPolicies from a real API server,
// and a CA issuing the mesh's SPIFFE certificates.
type securedMesh struct {
	ns    string
	mp    *running
	ca    *testpki.CA
	istio istioclient.Interface
}

func startSecuredMesh(t *testing.T) *securedMesh {
	t.Helper()
	ns := env.Namespace(t, nil)
	var o server.Options
	runIstio(t, ns, func(store crd.Store) {
		o.Policies = crd.NewPolicies(store, crd.PolicyOptions{RootNamespace: "istio-system"})
		o.Security = crd.NewSecurity(store, crd.SecurityOptions{RootNamespace: "istio-system"})
	})
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &securedMesh{ns: ns, mp: startObserved(t, ns, o), ca: testpki.New(t), istio: ic}
}

// identity is the SPIFFE identity of a service account of namespace ns.
func identity(ns, sa string) string { return "spiffe://cluster.local/ns/" + ns + "/sa/" + sa }

// bootstrapFor is the bootstrap `meshpilot bootstrap --cert --key
// --ca-cert` writes for a workload of the mesh with the certificate of
// account sa of namespace certNS, reaching the test's meshpilot in
// plaintext (the flags would also secure the xDS connection, which the
// in-process server does not serve here).
func (m *securedMesh) bootstrapFor(t *testing.T, certNS, sa, pod, ip string) []byte {
	t.Helper()
	cert, key := m.ca.Issue(t, testpki.Leaf{Name: certNS + "-" + sa + "-" + pod, URIs: []string{identity(certNS, sa)}})
	cfg, err := bootstrap.Build(bootstrap.Options{XDSServer: m.mp.XDSAddr(), Namespace: m.ns, Pod: pod, IP: ip,
		Cert: cert, Key: key, CACert: m.ca.File})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.XDSServers {
		cfg.XDSServers[i].ChannelCreds = []bootstrap.ChannelCreds{{Type: "insecure"}}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startServer starts a grpc-go xDS server with xDS credentials for a Pod
// labelled app=name on 127.0.0.<octet> (192.0.2.<octet> in the API), the
// one endpoint of Service name, and waits until it serves.
func (m *securedMesh) startServer(t *testing.T, name string, octet int, labels map[string]string) *grpctest.XDSBackend {
	t.Helper()
	ip, doc := fmt.Sprintf("127.0.0.%d", octet), fmt.Sprintf("192.0.2.%d", octet)
	port := grpctest.FreePort(t, ip)
	podLabels := map[string]string{"app": name}
	for k, v := range labels {
		podLabels[k] = v
	}
	env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: m.ns, Labels: podLabels},
		Spec:       corev1.PodSpec{ServiceAccountName: name, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}, doc)
	createService(t, m.ns, name, 7070)
	env.ApplyEndpointSlice(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-slice", Namespace: m.ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(port))}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{doc},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: m.ns, Name: name + "-0"},
		}},
	})
	srv := grpctest.StartSecureXDSBackend(t, ip, port, m.bootstrapFor(t, m.ns, name, name+"-0", doc))
	srv.AwaitServing(t)
	return srv
}

// meshClient is a grpc-go xDS client with xDS credentials and the
// certificate of account sa of namespace certNS, calling Service name.
func (m *securedMesh) meshClient(t *testing.T, name, certNS, sa string) *grpc.ClientConn {
	t.Helper()
	return grpctest.ChannelWithBootstrap(t, "xds:///"+name+"."+m.ns+":7070", m.bootstrapFor(t, certNS, sa, sa+"-client", "192.0.2.250"),
		grpctest.ChannelOptions{XDSCredentials: true, MapAddress: grpctest.DocToLoopback})
}

// plainClient dials a server directly, in plaintext, as a workload
// outside the mesh does.
func plainClient(t *testing.T, srv *grpctest.XDSBackend) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// requireMTLS makes the mesh's clients of Service name use mutual TLS
// (ISTIO_MUTUAL: a proxyless gRPC client, as under istiod, uses TLS only
// when a DestinationRule says so).
func (m *securedMesh) requireMTLS(t *testing.T, name string) {
	t.Helper()
	dr := &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns},
		Spec: apinetworking.DestinationRule{Host: name, TrafficPolicy: &apinetworking.TrafficPolicy{
			Tls: &apinetworking.ClientTLSSettings{Mode: apinetworking.ClientTLSSettings_ISTIO_MUTUAL}}},
	}
	if _, err := m.istio.NetworkingV1().DestinationRules(m.ns).Create(ctx(t), dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *securedMesh) applyPeerAuthentication(t *testing.T, name string, spec *apisecurity.PeerAuthentication) {
	t.Helper()
	api := m.istio.SecurityV1().PeerAuthentications(m.ns)
	cur, err := api.Get(ctx(t), name, metav1.GetOptions{})
	if err == nil {
		next := cur.DeepCopy()
		proto.Reset(&next.Spec)
		proto.Merge(&next.Spec, spec)
		if _, err := api.Update(ctx(t), next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	pa := &securityv1.PeerAuthentication{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns}}
	proto.Merge(&pa.Spec, spec)
	if _, err := api.Create(ctx(t), pa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *securedMesh) applyAuthorizationPolicy(t *testing.T, name string, spec *apisecurity.AuthorizationPolicy) {
	t.Helper()
	api := m.istio.SecurityV1().AuthorizationPolicies(m.ns)
	cur, err := api.Get(ctx(t), name, metav1.GetOptions{})
	if err == nil {
		next := cur.DeepCopy()
		proto.Reset(&next.Spec)
		proto.Merge(&next.Spec, spec)
		if _, err := api.Update(ctx(t), next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns}}
	proto.Merge(&ap.Spec, spec)
	if _, err := api.Create(ctx(t), ap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// check calls Health/Check; watch opens Health/Watch and reads its first
// answer: two methods of one service.
func check(cc *grpc.ClientConn) error {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(c, &healthpb.HealthCheckRequest{})
	return err
}

func watch(cc *grpc.ClientConn) error {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := healthpb.NewHealthClient(cc).Watch(c, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// awaitRPC calls rpc until it ends with want (codes.OK: succeeds), and
// returns how long that took.
func awaitRPC(t *testing.T, what string, rpc func() error, want codes.Code) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(grpctest.Wait)
	for {
		err := rpc()
		if status.Code(err) == want {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v, want %v within %v", what, err, want, grpctest.Wait)
		}
		time.Sleep(20 * time.Millisecond) // polling an RPC outcome
	}
}

// stays calls rpc a few times over a while and fails unless it always
// ends with want: something that must not change did not.
func stays(t *testing.T, what string, rpc func() error, want codes.Code) {
	t.Helper()
	for range 10 {
		if err := rpc(); status.Code(err) != want {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		time.Sleep(50 * time.Millisecond) // spread the calls over half a second
	}
}

// TestPeerAuthenticationGRPCServer: real grpc-go xDS servers and clients
// with the mesh's SPIFFE certificates. Under a namespace-wide STRICT
// PeerAuthentication a server refuses a plaintext client and serves a
// mesh client; PERMISSIVE is served as istiod serves it to gRPC servers
// (grpc-go cannot tell TLS from plaintext on one port): plaintext for a
// workload not labelled for mutual TLS, so that a plaintext client and
// a mesh client that does not ask for TLS both get through; a workload
// policy's portLevelMtls DISABLE wins over the namespace's STRICT.
func TestPeerAuthenticationGRPCServer(t *testing.T) {
	m := startSecuredMesh(t)
	srv := m.startServer(t, "checkout", 41, nil)
	plain := plainClient(t, srv)
	if err := check(plain); err != nil {
		t.Fatalf("without any policy, a plaintext RPC: %v", err)
	}

	m.applyPeerAuthentication(t, "default", &apisecurity.PeerAuthentication{
		Mtls: &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_STRICT}})
	awaitRPC(t, "STRICT: a plaintext RPC", func() error { return check(plainClient(t, srv)) }, codes.Unavailable)
	m.requireMTLS(t, "checkout")
	mesh := m.meshClient(t, "checkout", m.ns, "frontend")
	awaitRPC(t, "STRICT: a mesh client's RPC", func() error { return check(mesh) }, codes.OK)

	m.applyPeerAuthentication(t, "default", &apisecurity.PeerAuthentication{
		Mtls: &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_PERMISSIVE}})
	awaitRPC(t, "PERMISSIVE: a plaintext RPC", func() error { return check(plainClient(t, srv)) }, codes.OK)
	if err := m.istio.NetworkingV1().DestinationRules(m.ns).Delete(ctx(t), "checkout", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRPC(t, "PERMISSIVE: a mesh client's RPC without TLS", func() error { return check(m.meshClient(t, "checkout", m.ns, "frontend")) }, codes.OK)

	m.applyPeerAuthentication(t, "default", &apisecurity.PeerAuthentication{
		Mtls: &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_STRICT}})
	awaitRPC(t, "STRICT again: a plaintext RPC", func() error { return check(plainClient(t, srv)) }, codes.Unavailable)
	m.applyPeerAuthentication(t, "checkout-port", &apisecurity.PeerAuthentication{
		Selector:      &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "checkout"}},
		PortLevelMtls: map[uint32]*apisecurity.PeerAuthentication_MutualTLS{srv.Port: {Mode: apisecurity.PeerAuthentication_MutualTLS_DISABLE}}})
	awaitRPC(t, "port DISABLE under namespace STRICT: a plaintext RPC", func() error { return check(plainClient(t, srv)) }, codes.OK)
	if n := m.mp.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}

// TestAuthorizationPolicyGRPCServer: an ALLOW policy on one method lets
// the frontend account call it, and answers PERMISSION_DENIED to another
// account and for another method; a DENY on the namespace wins over the
// ALLOW; each change takes effect on the next RPCs without restarting
// the server; a policy selecting another workload changes nothing here.
func TestAuthorizationPolicyGRPCServer(t *testing.T) {
	m := startSecuredMesh(t)
	m.applyPeerAuthentication(t, "default", &apisecurity.PeerAuthentication{
		Mtls: &apisecurity.PeerAuthentication_MutualTLS{Mode: apisecurity.PeerAuthentication_MutualTLS_STRICT}})
	srv := m.startServer(t, "checkout", 42, nil)
	m.startServer(t, "payments", 43, nil)
	m.requireMTLS(t, "checkout")
	m.requireMTLS(t, "payments")
	frontend := m.meshClient(t, "checkout", m.ns, "frontend")
	other := m.meshClient(t, "checkout", m.ns, "other")
	awaitRPC(t, "no policy: frontend's Check", func() error { return check(frontend) }, codes.OK)
	awaitRPC(t, "no policy: other's Watch", func() error { return watch(other) }, codes.OK)

	m.applyAuthorizationPolicy(t, "checkout", &apisecurity.AuthorizationPolicy{
		Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "checkout"}},
		Action:   apisecurity.AuthorizationPolicy_ALLOW,
		Rules: []*apisecurity.Rule{{
			From: []*apisecurity.Rule_From{{Source: &apisecurity.Source{Principals: []string{"cluster.local/ns/" + m.ns + "/sa/frontend"}}}},
			To:   []*apisecurity.Rule_To{{Operation: &apisecurity.Operation{Paths: []string{"/grpc.health.v1.Health/Check"}}}},
		}},
	})
	took := awaitRPC(t, "ALLOW: other's Check", func() error { return check(other) }, codes.PermissionDenied)
	t.Logf("the ALLOW policy took effect %v after its write", took)
	stays(t, "ALLOW: frontend's Check", func() error { return check(frontend) }, codes.OK)
	stays(t, "ALLOW: frontend's Watch", func() error { return watch(frontend) }, codes.PermissionDenied)

	// A policy of another workload: nothing changes here.
	m.applyAuthorizationPolicy(t, "payments", &apisecurity.AuthorizationPolicy{
		Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "payments"}},
		Action:   apisecurity.AuthorizationPolicy_DENY,
		Rules:    []*apisecurity.Rule{{}},
	})
	payments := m.meshClient(t, "payments", m.ns, "frontend")
	awaitRPC(t, "payments' DENY: frontend's call to payments", func() error { return check(payments) }, codes.PermissionDenied)
	stays(t, "payments' DENY: frontend's Check of checkout", func() error { return check(frontend) }, codes.OK)

	m.applyAuthorizationPolicy(t, "deny-namespace", &apisecurity.AuthorizationPolicy{
		Selector: &apitype.WorkloadSelector{MatchLabels: map[string]string{"app": "checkout"}},
		Action:   apisecurity.AuthorizationPolicy_DENY,
		Rules:    []*apisecurity.Rule{{From: []*apisecurity.Rule_From{{Source: &apisecurity.Source{Namespaces: []string{m.ns}}}}}},
	})
	took = awaitRPC(t, "DENY on the namespace: frontend's Check", func() error { return check(frontend) }, codes.PermissionDenied)
	t.Logf("the DENY policy took effect %v after its write", took)

	// Another namespace's frontend is not denied by the namespace rule,
	// nor allowed by the principal rule.
	outsider := m.meshClient(t, "checkout", "elsewhere", "frontend")
	stays(t, "another namespace's frontend's Check", func() error { return check(outsider) }, codes.PermissionDenied)

	if err := m.istio.SecurityV1().AuthorizationPolicies(m.ns).Delete(ctx(t), "deny-namespace", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRPC(t, "DENY deleted: frontend's Check", func() error { return check(frontend) }, codes.OK)
	if mode, err := srv.Mode(); err != nil {
		t.Fatalf("the server stopped serving: %v %v", mode, err)
	}
	if n := m.mp.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}
