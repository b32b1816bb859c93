package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// meshBootstrap is the bootstrap `meshpilot bootstrap --cert --key
// --ca-cert` writes for a workload, its certificate provider "default"
// included, except that it reaches the test's xDS server in plaintext
// (the flags also secure the xDS connection, which the test server does
// not serve).
func meshBootstrap(t *testing.T, o bootstrap.Options) []byte {
	t.Helper()
	cfg, err := bootstrap.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.CertificateProviders["default"]; !ok {
		t.Fatalf("the bootstrap has no certificate provider \"default\": %+v", cfg.CertificateProviders)
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

// TestGRPCIstioMutualTLS: a grpc-go client and an xds.NewGRPCServer, both
// with xDS credentials and the certificates of meshpilot's bootstrap,
// talk mutual TLS when the rule for the service says ISTIO_MUTUAL and the
// server's workload is labelled for it: the server presents its SPIFFE
// certificate, the client verifies it against the service's accounts and
// presents its own. When the service's endpoints name another account,
// the client refuses the server (UNAVAILABLE); a client without a
// certificate of the mesh never reaches it.
func TestGRPCIstioMutualTLS(t *testing.T) {
	ca := testpki.New(t)
	serverCert, serverKey := ca.Issue(t, testpki.Leaf{Name: "echo", URIs: []string{"spiffe://cluster.local/ns/apps/sa/echo"}})
	clientCert, clientKey := ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/apps/sa/client"}})

	st := model.NewStore()
	policies := &testPolicies{}
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps"}
	policies.set(&model.DestinationRule{Namespace: "apps", Name: "echo", Host: echo.Hostname,
		Policy: &model.TrafficPolicy{TLS: &model.ClientTLS{Mode: model.TLSIstioMutual}}})
	ts := startServer(t, st, withPolicies(policies))

	port := grpctest.FreePort(t, "127.0.0.5")
	echo.Ports = []model.Port{{Name: "grpc", Port: 9080, TargetPort: int32(port), Protocol: model.GRPC}}
	endpointAs := func(account string) []*model.Endpoint {
		return []*model.Endpoint{{Address: "127.0.0.5", Port: uint32(port), ServicePortName: "grpc", Namespace: "apps",
			ServiceAccount: account, Labels: map[string]string{"security.istio.io/tlsMode": "istio"}}}
	}
	st.Update(echo, endpointAs("echo"))
	srv := grpctest.StartSecureXDSBackend(t, "127.0.0.5", port, meshBootstrap(t, bootstrap.Options{
		XDSServer: ts.addr, Namespace: "apps", Pod: "echo-1", IP: "127.0.0.5", Cert: serverCert, Key: serverKey, CACert: ca.File}))
	srv.AwaitServing(t)

	clientBootstrap := meshBootstrap(t, bootstrap.Options{
		XDSServer: ts.addr, Namespace: "apps", Pod: "client-1", Cert: clientCert, Key: clientKey, CACert: ca.File})
	newClient := func() *grpc.ClientConn {
		return grpctest.ChannelWithBootstrap(t, "xds:///echo.apps:9080", clientBootstrap, grpctest.ChannelOptions{XDSCredentials: true})
	}
	grpctest.AwaitSpread(t, newClient(), srv.Backend)

	t.Run("a client without the mesh's certificate is refused", func(t *testing.T) {
		// A plaintext client: the server's chain requires TLS.
		if _, err := grpctest.Call(context.Background(), dial(t, srv.Addr)); status.Code(err) != codes.Unavailable {
			t.Fatalf("a plaintext RPC to the mTLS server: %v, want Unavailable", err)
		}
	})
	t.Run("a server with another identity than the service's is refused", func(t *testing.T) {
		// A connection is verified once, when it is made: a new channel
		// makes new ones.
		st.Update(echo, endpointAs("someone-else"))
		awaitCluster(t, ts, "apps", model.ClusterName(9080, "", echo.Hostname), "spiffe://cluster.local/ns/apps/sa/someone-else")
		grpctest.AwaitUnavailable(t, newClient())
		st.Update(echo, endpointAs("echo"))
		awaitCluster(t, ts, "apps", model.ClusterName(9080, "", echo.Hostname), "spiffe://cluster.local/ns/apps/sa/echo")
		grpctest.AwaitSpread(t, newClient(), srv.Backend)
	})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}

// awaitCluster waits until the cluster the server gives gRPC clients of
// namespace holds text (a pushed change has reached the cache).
func awaitCluster(t *testing.T, ts *testServer, namespace, name, text string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		cl := (&servedModel{s: ts.Server}).get(t, resource.ClusterType, translate.Client{GRPC: true, Namespace: namespace}, name)
		b, err := protojson.Marshal(cl)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s never held %q: %s", name, text, b)
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
}

// TestGRPCMutualTLSCredentialName: a rule's MUTUAL tls with credentialName
// reaches a grpc-go client as the certificate provider instance of that
// name in its bootstrap: the client presents that instance's certificate
// to a TLS server outside the mesh that requires one and verifies the
// server against subjectAltNames; a server presenting another name is
// refused.
func TestGRPCMutualTLSCredentialName(t *testing.T) {
	ca := testpki.New(t)
	serverCert, serverKey := ca.Issue(t, testpki.Leaf{Name: "partner", URIs: []string{"spiffe://partner.example/api"}})
	clientCert, clientKey := ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://shop.example/client"}})
	pair, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	partner := grpctest.StartTLSBackend(t, "127.0.0.6", credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}))

	st := model.NewStore()
	svc := service("partner", "shop", 9443)
	st.Update(svc, []*model.Endpoint{{Address: partner.IP, Port: partner.Port, ServicePortName: "grpc"}})
	policies := &testPolicies{}
	rule := func(san string) *model.DestinationRule {
		return &model.DestinationRule{Namespace: "shop", Name: "partner", Host: svc.Hostname, Policy: &model.TrafficPolicy{
			TLS: &model.ClientTLS{Mode: model.TLSMutual, CredentialName: "partner-certs", SubjectAltNames: []string{san}}}}
	}
	policies.set(rule("spiffe://partner.example/api"))
	ts := startServer(t, st, withPolicies(policies))

	// The bootstrap meshpilot writes, its instance renamed as the rule
	// names it.
	cfg, err := bootstrap.Build(bootstrap.Options{XDSServer: ts.addr, Namespace: "shop", Pod: "client-1", Cert: clientCert, Key: clientKey, CACert: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	cfg.XDSServers[0].ChannelCreds = []bootstrap.ChannelCreds{{Type: "insecure"}}
	cfg.CertificateProviders = map[string]bootstrap.CertificateProvider{"partner-certs": cfg.CertificateProviders["default"]}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	newClient := func() *grpc.ClientConn {
		return grpctest.ChannelWithBootstrap(t, "xds:///partner.shop:9443", b, grpctest.ChannelOptions{XDSCredentials: true})
	}
	grpctest.AwaitSpread(t, newClient(), partner)

	policies.set(rule("spiffe://partner.example/other"))
	ts.Push(pushOf(ruleChanged(svc.Hostname)))
	awaitCluster(t, ts, "shop", model.ClusterName(9443, "", svc.Hostname), "spiffe://partner.example/other")
	grpctest.AwaitUnavailable(t, newClient())
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
