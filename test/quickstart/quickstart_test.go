// Package quickstart runs the meshpilot binary the way the README's first
// steps do, without a cluster: "meshpilot serve --from" with "meshpilot
// bootstrap" feeding a real grpc-go xDS client. The demo's own binary is
// tested in cmd/meshpilot-demo.
package quickstart

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// start runs bin with args in the background (see testutil.Start).
func start(t *testing.T, bin string, args ...string) *testutil.Process {
	t.Helper()
	return testutil.Start(t, exec.Command(bin, args...))
}

// writeMesh writes a namespace "files" with a service echo (port 7070)
// whose endpoints are the backends.
func writeMesh(t *testing.T, dir string, bs []grpctest.Backend) {
	t.Helper()
	var eps strings.Builder
	for _, b := range bs {
		fmt.Fprintf(&eps, "- addresses: [%s]\n", b.IP)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: files}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: files}
spec:
  ports: [{name: grpc, port: 7070, targetPort: %d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: files, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints:
%s`, bs[0].Port, bs[0].Port, eps.String())
	if err := os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBootstrap runs "meshpilot bootstrap" and returns what it prints.
func runBootstrap(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bootstrap"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bootstrap %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// channelFrom opens a grpc-go xDS channel configured by a bootstrap
// document, as GRPC_XDS_BOOTSTRAP would configure it.
func channelFrom(t *testing.T, bootstrapJSON []byte, target string) *grpc.ClientConn {
	t.Helper()
	res, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatalf("grpc-go rejects the bootstrap: %v\n%s", err, bootstrapJSON)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(res))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestServeFromAFolderWithBootstrap serves a folder with "meshpilot serve
// --from" and reaches its backends through a grpc-go channel built from
// what "meshpilot bootstrap" prints.
func TestServeFromAFolderWithBootstrap(t *testing.T) {
	bin := testutil.BuildMeshpilot(t)
	bs := grpctest.StartBackends(t, "127.0.0.41", "127.0.0.42")
	dir := t.TempDir()
	writeMesh(t, dir, bs)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	start(t, bin, "serve", "--from", dir, "--xds-addr", xdsAddr, "--http-addr", httpAddr)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)

	out := runBootstrap(t, bin, "--xds-server", xdsAddr, "--namespace", "files", "--pod", "client-1", "--ip", "127.0.0.1")
	var doc struct {
		Node struct {
			ID       string            `json:"id"`
			Metadata map[string]string `json:"metadata"`
		} `json:"node"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("bootstrap is not JSON: %v\n%s", err, out)
	}
	if want := "sidecar~127.0.0.1~client-1.files~files.svc.cluster.local"; doc.Node.ID != want {
		t.Fatalf("node id %q, want %q", doc.Node.ID, want)
	}
	if doc.Node.Metadata["GENERATOR"] != "grpc" || doc.Node.Metadata["NAMESPACE"] != "files" {
		t.Fatalf("node metadata %v", doc.Node.Metadata)
	}
	// A short name resolves in the client's namespace, which the server
	// learns from the bootstrap's node.
	grpctest.AwaitSpread(t, channelFrom(t, out, "xds:///echo:7070"), bs...)
}

// TestBootstrapWithMutualTLS: the printed bootstrap's tls channel
// credentials reach a meshpilot that requires client certificates, and
// clients without one, with one from another CA, or with one whose SPIFFE
// ID names another namespace than their node, are refused.
func TestBootstrapWithMutualTLS(t *testing.T) {
	bin := testutil.BuildMeshpilot(t)
	bs := grpctest.StartBackends(t, "127.0.0.43")
	dir := t.TempDir()
	writeMesh(t, dir, bs)
	pki := newPKI(t)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	start(t, bin, "serve", "--from", dir, "--xds-addr", xdsAddr, "--http-addr", httpAddr,
		"--xds-cert", pki.serverCert, "--xds-key", pki.serverKey, "--xds-client-ca", pki.ca)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)

	out := runBootstrap(t, bin, "--xds-server", xdsAddr, "--namespace", "files",
		"--ca-cert", pki.ca, "--cert", pki.clientCert, "--key", pki.clientKey)
	if !bytes.Contains(out, []byte(`"type": "tls"`)) || !bytes.Contains(out, []byte(`"plugin_name": "file_watcher"`)) {
		t.Fatalf("bootstrap without tls credentials or certificate provider:\n%s", out)
	}
	grpctest.AwaitSpread(t, channelFrom(t, out, "xds:///echo.files.svc.cluster.local:7070"), bs...)

	stranger := newPKI(t)
	for _, tc := range []struct {
		name, pod string
		certFlags []string
	}{
		{"a client without a certificate is refused", "no-cert", nil},
		{"a client certificate from another CA is refused", "stranger", []string{"--cert", stranger.clientCert, "--key", stranger.clientKey}},
		{"a client certificate of another namespace is refused", "shop-client", []string{"--cert", pki.shopCert, "--key", pki.shopKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runBootstrap(t, bin, append([]string{"--xds-server", xdsAddr, "--namespace", "files", "--pod", tc.pod, "--ca-cert", pki.ca}, tc.certFlags...)...)
			// Without configuration from the xDS server the channel fails
			// the RPC instead of waiting.
			if _, err := grpctest.Call(context.Background(), channelFrom(t, out, "xds:///echo.files.svc.cluster.local:7070")); status.Code(err) != codes.Unavailable {
				t.Fatalf("RPC through meshpilot without a valid client certificate: %v, want Unavailable", err)
			}
			// Refused in the TLS handshake, or at the stream's first
			// request (PermissionDenied): meshpilot holds no stream.
			for _, node := range xdsNodes(t, httpAddr) {
				if strings.Contains(node, "~"+tc.pod+".files~") {
					t.Fatalf("meshpilot holds a stream of %s", node)
				}
			}
		})
	}
}

// xdsNodes lists the node ids of the xDS streams meshpilot holds, from its
// /debug/syncz.
func xdsNodes(t *testing.T, httpAddr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/debug/syncz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var streams []struct {
		NodeID string `json:"nodeID"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&streams); err != nil {
		t.Fatalf("/debug/syncz: %v", err)
	}
	var nodes []string
	for _, s := range streams {
		nodes = append(nodes, s.NodeID)
	}
	if len(nodes) == 0 {
		t.Fatal("/debug/syncz lists no stream, not even the client with a valid certificate")
	}
	return nodes
}

type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	// shopCert and shopKey are a client certificate of namespace shop.
	shopCert, shopKey string
}

// newPKI writes a CA, a server certificate for 127.0.0.1 and client
// certificates of namespaces files and shop.
func newPKI(t *testing.T) pki {
	t.Helper()
	ca := testpki.New(t)
	p := pki{ca: ca.File}
	p.serverCert, p.serverKey = ca.Issue(t, testpki.Leaf{Name: "server", IPs: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	// A workload of namespace files, which the clients' bootstraps name.
	p.clientCert, p.clientKey = ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/files/sa/default"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p.shopCert, p.shopKey = ca.Issue(t, testpki.Leaf{Name: "shop", URIs: []string{"spiffe://cluster.local/ns/shop/sa/default"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return p
}

func TestServeFromErrors(t *testing.T) {
	bin := testutil.BuildMeshpilot(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing folder", []string{"serve", "--from", missing}, missing},
		{"cluster flags with --from", []string{"serve", "--from", t.TempDir(), "--namespaces", "a"}, "--namespaces applies to a cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, bin, append(tc.args, "--xds-addr", testutil.FreeAddr(t), "--http-addr", testutil.FreeAddr(t))...)
			if err := p.Wait(t, 30*time.Second); err == nil {
				t.Fatal("serve did not fail")
			}
			p.Out.Await(t, "one clear error", 0, func(l string) bool {
				return strings.HasPrefix(l, "meshpilot: ") && strings.Contains(l, tc.want)
			})
		})
	}
}
