package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// workload is the certificate of a workload of namespace ns, as Istio's
// CA issues it.
func workload(t *testing.T, ca *testpki.CA, ns, sa string) tls.Certificate {
	return ca.IssuePEM(t, testpki.Leaf{Name: ns + "-" + sa, URIs: []string{"spiffe://cluster.local/ns/" + ns + "/sa/" + sa},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).KeyPair(t)
}

// TestClientsSeeWhatTheirIdentityIsEntitledTo: under --xds-client-ca, a
// client is served as the namespace its certificate's SPIFFE ID names:
// shop's client gets cart, which is exported to shop alone, web's client
// gets cart as an unknown name (absent), and web's client whose node
// claims shop is refused with PermissionDenied, logged once however often
// it comes back; on state of the world and delta streams alike.
func TestClientsSeeWhatTheirIdentityIsEntitledTo(t *testing.T) {
	ca := testpki.New(t)
	cert, key := ca.Issue(t, serverLeaf)
	store := model.NewStore()
	ports := []model.Port{{Name: "grpc", Port: 9080, Protocol: model.GRPC}}
	store.Update(&model.Service{Hostname: "api.shop.svc.cluster.local", Name: "api", Namespace: "shop", Ports: ports},
		[]*model.Endpoint{{Address: "10.1.0.1", Port: 9080, ServicePortName: "grpc"}})
	// networking.istio.io/exportTo: "." — shop alone sees it.
	store.Update(&model.Service{Hostname: "cart.shop.svc.cluster.local", Name: "cart", Namespace: "shop", Ports: ports, ExportTo: []string{"."}},
		[]*model.Endpoint{{Address: "10.1.0.2", Port: 9080, ServicePortName: "grpc"}})
	const (
		apiListener  = "api.shop.svc.cluster.local:9080"
		cartListener = "cart.shop.svc.cluster.local:9080"
		apiCluster   = "outbound|9080||api.shop.svc.cluster.local"
		cartCluster  = "outbound|9080||cart.shop.svc.cluster.local"
	)
	lines := testutil.NewLines()
	s := runTLS(t, store, server.Options{XDSCert: cert, XDSKey: key, XDSClientCA: ca.File}, lines)
	shopCert, webCert := workload(t, ca, "shop", "cart"), workload(t, ca, "web", "ui")

	for _, delta := range []bool{false, true} {
		kind := map[bool]string{false: "state of the world", true: "delta"}[delta]
		t.Run(kind, func(t *testing.T) {
			open := func(cert tls.Certificate, pod, ns string) *xdstest.TestClient {
				return xdstest.Connect(t, dialTLS(t, s.XDSAddr(), ca.Pool(), cert), xdstest.Options{
					AutoACK: true, Delta: delta, Wait: testutil.Wait,
					Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: xdstest.SidecarID("10.0.0.9", pod, ns), Namespace: ns}),
				})
			}
			subscribe := func(c *xdstest.TestClient) {
				c.Subscribe(resourcev3.ListenerType, apiListener, cartListener)
				c.Subscribe(resourcev3.ClusterType, apiCluster, cartCluster)
			}
			shop := open(shopCert, "cart-1", "shop")
			subscribe(shop)
			shop.WaitFor(resourcev3.ListenerType, apiListener, cartListener)
			shop.WaitFor(resourcev3.ClusterType, apiCluster, cartCluster)

			web := open(webCert, "ui-1", "web")
			subscribe(web)
			web.WaitFor(resourcev3.ListenerType, apiListener)
			web.WaitFor(resourcev3.ClusterType, apiCluster)

			pod := "impostor-" + strings.Fields(kind)[0]
			for range 3 { // a client that reconnects after each refusal
				impostor := open(webCert, pod, "shop")
				impostor.Subscribe(resourcev3.ListenerType, cartListener)
				err := impostor.ExpectEnd(testutil.Wait)
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "claims namespace shop") {
					t.Fatalf("a client of web claiming shop: %v, want PermissionDenied naming the claim", err)
				}
			}
			lines.Await(t, "the refusal logged", 0, func(l string) bool {
				return strings.Contains(l, "refusing a client its certificate does not entitle") && strings.Contains(l, pod)
			})
			if n := strings.Count(lines.String(), "~"+pod+".shop~"); n != 1 {
				t.Fatalf("%d log lines name the refused client, want 1:\n%s", n, lines)
			}
			// /debug/syncz says as whom each stream was served.
			want := map[string]string{shop.Node().GetId(): "spiffe://cluster.local/ns/shop/sa/cart", web.Node().GetId(): "spiffe://cluster.local/ns/web/sa/ui"}
			for _, ci := range s.XDS().Clients() {
				if w, ok := want[ci.NodeID]; ok && ci.Delta == delta {
					if ci.Identity != w {
						t.Errorf("stream of %s: identity %q, want %q", ci.NodeID, ci.Identity, w)
					}
					delete(want, ci.NodeID)
				}
			}
			if len(want) > 0 {
				t.Errorf("no stream of %v", want)
			}
			// Those entitled were served on.
			for _, c := range []*xdstest.TestClient{shop, web} {
				select {
				case <-c.Done():
					t.Fatalf("%s's stream ended: %v", c.Node().GetId(), c.Err())
				default:
				}
			}
		})
	} // Three refusals on each kind of stream.
	if m := scrape(s); !strings.Contains(m, "meshpilot_xds_permission_denied_total 6") {
		t.Fatalf("the metrics do not count 6 refusals:\n%s", m)
	}
}
