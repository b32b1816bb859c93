package xds

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testpki"
)

// TestGRPCIstioMutualIdentitiesAsIstiod: a real grpc-go client under
// ISTIO_MUTUAL verifies its server against the service's accounts as
// istiod lists them: its endpoints' and the service's own (a Service's
// canonical service accounts, a ServiceEntry's subjectAltNames), and
// not against the rule's tls.subjectAltNames, which istiod's grpcgen
// does not read. Here the server's identity is the service's own only,
// and the rule names another: the client reaches it.
func TestGRPCIstioMutualIdentitiesAsIstiod(t *testing.T) {
	ca := testpki.New(t)
	const identity = "spiffe://cluster.local/ns/apps/sa/echo-canonical"
	serverCert, serverKey := ca.Issue(t, testpki.Leaf{Name: "echo", URIs: []string{identity}})
	clientCert, clientKey := ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/apps/sa/client"}})

	st := model.NewStore()
	policies := &testPolicies{}
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps", ServiceAccounts: []string{identity}}
	policies.set(&model.DestinationRule{Namespace: "apps", Name: "echo", Host: echo.Hostname,
		Policy: &model.TrafficPolicy{TLS: &model.ClientTLS{Mode: model.TLSIstioMutual,
			SubjectAltNames: []string{"spiffe://cluster.local/ns/apps/sa/nobody"}}}})
	ts := startServer(t, st, withPolicies(policies))

	port := grpctest.FreePort(t, "127.0.0.6")
	echo.Ports = []model.Port{{Name: "grpc", Port: 9080, TargetPort: int32(port), Protocol: model.GRPC}}
	st.Update(echo, []*model.Endpoint{{Address: "127.0.0.6", Port: uint32(port), ServicePortName: "grpc", Namespace: "apps",
		ServiceAccount: "other", Labels: map[string]string{"security.istio.io/tlsMode": "istio"}}})
	srv := grpctest.StartSecureXDSBackend(t, "127.0.0.6", port, meshBootstrap(t, bootstrap.Options{
		XDSServer: ts.addr, Namespace: "apps", Pod: "echo-1", IP: "127.0.0.6", Cert: serverCert, Key: serverKey, CACert: ca.File}))
	srv.AwaitServing(t)

	clientBootstrap := meshBootstrap(t, bootstrap.Options{
		XDSServer: ts.addr, Namespace: "apps", Pod: "client-1", Cert: clientCert, Key: clientKey, CACert: ca.File})
	newClient := func() *grpc.ClientConn {
		return grpctest.ChannelWithBootstrap(t, "xds:///echo.apps:9080", clientBootstrap, grpctest.ChannelOptions{XDSCredentials: true})
	}
	grpctest.AwaitSpread(t, newClient(), srv.Backend)

	// Without the service's own identity, the endpoint's account alone
	// does not match the server's certificate.
	echo2 := *echo
	echo2.ServiceAccounts = nil
	st.Update(&echo2, []*model.Endpoint{{Address: "127.0.0.6", Port: uint32(port), ServicePortName: "grpc", Namespace: "apps",
		ServiceAccount: "other", Labels: map[string]string{"security.istio.io/tlsMode": "istio"}}})
	awaitCluster(t, ts, "apps", model.ClusterName(9080, "", echo.Hostname), "spiffe://cluster.local/ns/apps/sa/other")
	grpctest.AwaitUnavailable(t, newClient())
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
