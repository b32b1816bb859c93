package bootstrap

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/xds"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestBuild(t *testing.T) {
	cfg, err := Build(Options{XDSServer: "meshpilot.istio-system:15010", Namespace: "shop", Pod: "cart-7d9f", IP: "10.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "sidecar~10.0.0.7~cart-7d9f.shop~shop.svc.cluster.local"; cfg.Node.ID != want {
		t.Fatalf("node id %q, want %q", cfg.Node.ID, want)
	}
	if md := cfg.Node.Metadata; md["GENERATOR"] != "grpc" || md["NAMESPACE"] != "shop" {
		t.Fatalf("metadata %v", md)
	}
	if _, ok := cfg.Node.Metadata["NODE_NAME"]; ok {
		t.Fatalf("NODE_NAME without a node name: %v", cfg.Node.Metadata)
	}
	onNode, err := Build(Options{XDSServer: "127.0.0.1:15010", NodeName: "worker-3"})
	if err != nil || onNode.Node.Metadata["NODE_NAME"] != "worker-3" {
		t.Fatalf("node name: %v, %v", onNode.Node.Metadata, err)
	}
	s := cfg.XDSServers[0]
	if s.ServerURI != "meshpilot.istio-system:15010" || s.ChannelCreds[0].Type != "insecure" || s.ChannelCreds[0].Config != nil {
		t.Fatalf("server %+v", s)
	}
	if cfg.CertificateProviders != nil {
		t.Fatalf("certificate providers without certificates: %v", cfg.CertificateProviders)
	}
	// grpc-go puts its listening address in place of "%s"; the server must
	// read the name it asks for as an inbound listener.
	asked := strings.Replace(cfg.ServerListenerResourceNameTemplate, "%s", "[::]:50051", 1)
	if host, port, ok := model.ParseInboundListenerName(asked); !ok || host != "::" || port != 50051 {
		t.Fatalf("server listener %q read as %q, %d, %v", asked, host, port, ok)
	}

	custom, err := Build(Options{XDSServer: "127.0.0.1:15010", NodeID: "my-node", DomainSuffix: "corp"})
	if err != nil || custom.Node.ID != "my-node" || custom.Node.Metadata["NAMESPACE"] != "default" {
		t.Fatalf("custom node id: %+v, %v", custom, err)
	}
	defaults, _ := Build(Options{XDSServer: "127.0.0.1:15010", DomainSuffix: "corp"})
	if defaults.Node.ID != "sidecar~127.0.0.1~client.default~default.svc.corp" {
		t.Fatalf("default node id %q", defaults.Node.ID)
	}
}

func TestBuildTLS(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Build(Options{XDSServer: "127.0.0.1:15012", CACert: filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "cert.pem"), Key: "key.pem"})
	if err != nil {
		t.Fatal(err)
	}
	creds := cfg.XDSServers[0].ChannelCreds[0]
	if creds.Type != "tls" || creds.Config.CACertificateFile != filepath.Join(dir, "ca.pem") ||
		creds.Config.CertificateFile != filepath.Join(dir, "cert.pem") || !filepath.IsAbs(creds.Config.PrivateKeyFile) {
		t.Fatalf("tls creds %+v", creds.Config)
	}
	p := cfg.CertificateProviders["default"]
	if p.PluginName != "file_watcher" || p.Config.CertificateFile == "" || p.Config.PrivateKeyFile == "" || p.Config.CACertificateFile == "" {
		t.Fatalf("certificate provider %+v", p)
	}

	caOnly, err := Build(Options{XDSServer: "127.0.0.1:15012", CACert: "ca.pem"})
	if err != nil || caOnly.XDSServers[0].ChannelCreds[0].Type != "tls" || caOnly.CertificateProviders != nil {
		t.Fatalf("CA only: %+v, %v", caOnly, err)
	}
}

// grpc-go itself must accept what we write.
func TestGRPCAcceptsTheJSON(t *testing.T) {
	for _, o := range []Options{
		{XDSServer: "127.0.0.1:15010"},
		{XDSServer: "127.0.0.1:15012", CACert: "/etc/certs/ca.pem", Cert: "/etc/certs/cert.pem", Key: "/etc/certs/key.pem"},
	} {
		out, err := JSON(o)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if _, err := xds.NewXDSResolverWithConfigForTesting(out); err != nil {
			t.Fatalf("grpc-go rejects %s: %v", out, err)
		}
	}
}

// grpc-js-xds refuses a bootstrap whose node has no locality ("locality
// field missing in node element") and then fails every RPC; C-core and
// grpc-go accept one. An empty locality satisfies all three.
func TestNodeHasALocality(t *testing.T) {
	out, err := JSON(Options{XDSServer: "127.0.0.1:15010"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Node map[string]json.RawMessage `json:"node"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var locality map[string]string
	if err := json.Unmarshal(doc.Node["locality"], &locality); err != nil || locality == nil {
		t.Fatalf("node.locality is %s (%v), want an object:\n%s", doc.Node["locality"], err, out)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no server", Options{}, "required"},
		{"no port", Options{XDSServer: "meshpilot"}, "host:port"},
		{"bad port", Options{XDSServer: "meshpilot:99999"}, "1 to 65535"},
		{"bad namespace", Options{XDSServer: "m:1", Namespace: "Shop"}, "namespace"},
		{"bad pod", Options{XDSServer: "m:1", Pod: "cart_1"}, "pod"},
		{"bad ip", Options{XDSServer: "m:1", IP: "10.0.0"}, "ip"},
		{"cert without key", Options{XDSServer: "m:1", Cert: "c.pem"}, "both"},
		{"bad node name", Options{XDSServer: "m:1", NodeName: "Worker_3"}, "node name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
