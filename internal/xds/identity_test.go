package xds

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

func TestParseSPIFFEID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SPIFFEID
		ok   bool
	}{
		{"spiffe://cluster.local/ns/shop/sa/cart", SPIFFEID{"cluster.local", "shop", "cart"}, true},
		{"spiffe://corp.example/ns/a-b/sa/default", SPIFFEID{"corp.example", "a-b", "default"}, true},
		{"spiffe://cluster.local/ns/shop", SPIFFEID{}, false},               // no service account
		{"spiffe://cluster.local/ns/shop/sa/cart/extra", SPIFFEID{}, false}, // longer path
		{"spiffe://cluster.local/sa/cart/ns/shop", SPIFFEID{}, false},       // parts swapped
		{"spiffe://cluster.local/ns//sa/cart", SPIFFEID{}, false},           // empty namespace
		{"spiffe:///ns/shop/sa/cart", SPIFFEID{}, false},                    // empty trust domain
		{"spiffe://partner.example/api", SPIFFEID{}, false},                 // SPIFFE, not a workload
		{"https://cluster.local/ns/shop/sa/cart", SPIFFEID{}, false},        // not SPIFFE
		{"", SPIFFEID{}, false},
	} {
		got, err := ParseSPIFFEID(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSPIFFEID(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

// identity is the identity of a verified certificate with these URI
// subject alternative names.
func identity(t *testing.T, uris ...string) peerIdentity {
	t.Helper()
	cert := &x509.Certificate{}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		cert.URIs = append(cert.URIs, u)
	}
	return identityOfTLS(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}})
}

func TestEntitled(t *testing.T) {
	domains := []string{"cluster.local", "old.example"}
	shop := "spiffe://cluster.local/ns/shop/sa/cart"
	for _, tc := range []struct {
		name   string
		peer   peerIdentity
		ns, sa string
		want   string // in the reason; empty: entitled
	}{
		{"its own namespace", identity(t, shop), "shop", "", ""},
		{"its own namespace and service account", identity(t, shop), "shop", "cart", ""},
		{"an alias of the trust domain", identity(t, "spiffe://old.example/ns/shop/sa/cart"), "shop", "", ""},
		{"no namespace claimed", identity(t, shop), "", "", ""},
		{"one of several identities", identity(t, "spiffe://cluster.local/ns/web/sa/x", shop), "shop", "", ""},
		{"another namespace", identity(t, shop), "web", "", "claims namespace web"},
		{"another service account", identity(t, shop), "shop", "admin", "service account admin"},
		{"another trust domain", identity(t, "spiffe://partner.example/ns/shop/sa/cart"), "shop", "", "not workload identities of trust domain cluster.local, old.example"},
		{"a SPIFFE ID that is not a workload's", identity(t, "spiffe://cluster.local/admin"), "shop", "", "not workload identities"},
		{"no SPIFFE ID", identity(t), "shop", "", "has no SPIFFE ID"},
		{"no SPIFFE ID, no namespace claimed", identity(t), "", "", "has no SPIFFE ID"},
		{"no verified certificate", peerIdentity{}, "shop", "", "no verified client certificate"},
		{"a certificate the handshake did not verify", identityOfTLS(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}), "shop", "", "no verified client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := entitled(tc.peer, domains, tc.ns, tc.sa)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("entitled, want refused with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("refused with %q, want %q in it", err, tc.want)
			}
		})
	}
}

// TestNodeEntitled: the namespace checked is the one the generators
// serve the node (translate.ClientFromNode): metadata NAMESPACE, else the node id's;
// a SERVICE_ACCOUNT in the metadata is checked too; the trust domain is
// MeshConfig's at the time of the check.
func TestNodeEntitled(t *testing.T) {
	shop := identity(t, "spiffe://cluster.local/ns/shop/sa/cart")
	node := func(id string, md map[string]string) *core.Node {
		return xdstest.GRPCNode(xdstest.NodeOptions{ID: id, Metadata: md})
	}
	for _, tc := range []struct {
		name string
		node *core.Node
		ok   bool
	}{
		{"Istio node id of its namespace", node("sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", nil), true},
		{"Istio node id of another namespace", node("sidecar~10.0.0.1~cart-1.web~web.svc.cluster.local", nil), false},
		{"NAMESPACE of its namespace", node("client-1", map[string]string{"NAMESPACE": "shop"}), true},
		{"NAMESPACE of another namespace", node("client-1", map[string]string{"NAMESPACE": "web"}), false},
		{"NAMESPACE over the node id", node("sidecar~10.0.0.1~cart-1.shop~shop.svc.cluster.local", map[string]string{"NAMESPACE": "web"}), false},
		{"no namespace at all", node("client-1", nil), true},
		{"its service account", node("client-1", map[string]string{"NAMESPACE": "shop", "SERVICE_ACCOUNT": "cart"}), true},
		{"another service account", node("client-1", map[string]string{"NAMESPACE": "shop", "SERVICE_ACCOUNT": "admin"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(Options{Discovery: model.NewStore(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if _, err := s.nodeEntitled(shop, tc.node); (err == nil) != tc.ok {
				t.Fatalf("nodeEntitled = %v, want entitled %v", err, tc.ok)
			}
		})
	}
	m := &testMesh{}
	m.Set(&model.MeshSettings{TrustDomain: "corp.example"})
	s := NewServer(Options{Discovery: model.NewStore(), Mesh: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := s.nodeEntitled(shop, node("client-1", map[string]string{"NAMESPACE": "shop"})); err == nil {
		t.Fatal("an identity of cluster.local entitled in trust domain corp.example")
	}
	m.Set(&model.MeshSettings{TrustDomain: "corp.example", TrustDomainAliases: []string{"cluster.local"}})
	if _, err := s.nodeEntitled(shop, node("client-1", map[string]string{"NAMESPACE": "shop"})); err != nil {
		t.Fatalf("an identity of an alias of the trust domain refused: %v", err)
	}
}

// TestRESTIdentity: REST discovery over mutual TLS answers a client as
// the namespace its certificate names and 403 to one that claims
// another, or that presents no certificate (the plaintext HTTP port).
func TestRESTIdentity(t *testing.T) {
	st := model.NewStore()
	st.Update(exported("cart", "shop", 9080, "."), endpoints(9080, model.Healthy, "10.0.0.2"))
	cart := model.ClusterName(9080, "", "cart.shop.svc.cluster.local")
	ts := startServer(t, st, func(o *Options) { o.RequireIdentity = true })
	ca := testpki.New(t)
	hs := httptest.NewUnstartedServer(ts.RESTHandler())
	hs.TLS = &tls.Config{ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	hs.StartTLS()
	defer hs.Close()
	plain := httptest.NewServer(ts.RESTHandler())
	defer plain.Close()

	client := func(uri string) *http.Client {
		// The test server's client trusts its certificate; each client
		// here has a transport of its own.
		tr := hs.Client().Transport.(*http.Transport).Clone()
		if uri != "" {
			tr.TLSClientConfig.Certificates = []tls.Certificate{ca.IssuePEM(t, testpki.Leaf{Name: "client", URIs: []string{uri}}).KeyPair(t)}
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	post := func(c *http.Client, base, id, ns string) (int, string) {
		t.Helper()
		b, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: grpcNode(id, ns), ResourceNames: []string{cart}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Post(base+"/v3/discovery:clusters", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	shop, web := client("spiffe://cluster.local/ns/shop/sa/cart"), client("spiffe://cluster.local/ns/web/sa/ui")
	for _, tc := range []struct {
		name     string
		c        *http.Client
		base, ns string
		wantCode int
		want     string
	}{
		{"shop's client as shop sees cart", shop, hs.URL, "shop", http.StatusOK, cart},
		{"web's client as web: cart is not exported to it", web, hs.URL, "web", http.StatusOK, ""},
		{"web's client claiming shop", web, hs.URL, "shop", http.StatusForbidden, "claims namespace shop"},
		{"no client certificate", client(""), hs.URL, "shop", http.StatusForbidden, "no verified client certificate"},
		{"the plaintext port", http.DefaultClient, plain.URL, "shop", http.StatusForbidden, "no verified client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.c, tc.base, tc.name, tc.ns)
			if code != tc.wantCode || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %.300s, want %d with %q", code, body, tc.wantCode, tc.want)
			}
			if tc.want == "" && strings.Contains(body, "cart") {
				t.Fatalf("web's client was sent cart: %.300s", body)
			}
		})
	}
	if got := strings.Count(ts.logs.String(), "refusing a client its certificate does not entitle"); got != 3 {
		t.Errorf("%d refusal lines for three clients, want 3:\n%s", got, ts.logs)
	}
}
