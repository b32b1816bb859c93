package e2e

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/gwstatus"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// gatewayMesh runs meshpilot on several namespaces with the Gateway API
// routes read from the API server (the standard channel's CRDs, whose
// validation runs), as serve wires them: the Istio registry's store, the
// Kubernetes registry's Services, one Routes.
type gatewayMesh struct {
	srv    *running
	routes *crd.Routes
	status *configstatus.Reporter
	writer *statusRecorder
	client gatewayclient.Interface
}

// statusRecorder is a gwstatus.Writer that keeps the last status of each
// route, for the test to read.
type statusRecorder struct {
	set chan gwstatus.RouteStatus
}

func (s *statusRecorder) Set(st gwstatus.RouteStatus) {
	select {
	case s.set <- st:
	default:
	}
}
func (s *statusRecorder) Delete(string, string, string) {}

func startGatewayMesh(t *testing.T, namespaces ...string) *gatewayMesh {
	t.Helper()
	env.InstallIstioCRDs(t)
	env.InstallGatewayAPICRDs(t, "standard")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	kubeReg, err := kube.New(env.API, kube.Options{Namespaces: namespaces, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	istioReg, err := crd.NewForConfig(env.Config, crd.Options{Namespaces: namespaces, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m := &gatewayMesh{status: configstatus.NewReporter(), writer: &statusRecorder{set: make(chan gwstatus.RouteStatus, 1000)}}
	m.routes = crd.NewRoutes(istioReg, crd.RouteOptions{Status: m.status, Services: kubeReg, GatewayStatus: m.writer})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- istioReg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("istio registry: %v", err)
		}
	})
	m.srv = startObserved(t, namespaces[0], server.Options{
		Sources: []aggregate.Source{{Name: "kubernetes", Controller: kubeReg}},
		Routes:  m.routes,
	})
	m.client, err = gatewayclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// httpRoute creates an HTTPRoute from YAML, or replaces the spec of the
// one of that name.
func (m *gatewayMesh) httpRoute(t *testing.T, doc string) {
	t.Helper()
	var r gatewayv1.HTTPRoute
	if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	api := m.client.GatewayV1().HTTPRoutes(r.Namespace)
	if cur, err := api.Get(ctx(t), r.Name, metav1.GetOptions{}); err == nil {
		cur.Spec = r.Spec
		if _, err := api.Update(ctx(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx(t), &r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (m *gatewayMesh) grpcRoute(t *testing.T, doc string) {
	t.Helper()
	var r gatewayv1.GRPCRoute
	if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	if _, err := m.client.GatewayV1().GRPCRoutes(r.Namespace).Create(ctx(t), &r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// awaitCondition waits for a status of the route whose first parent's
// condition of type cond has status and reason.
func (m *gatewayMesh) awaitCondition(t *testing.T, ns, name, cond, want string) {
	t.Helper()
	last := "none"
	testenv.Eventually(t, name+" "+cond+" "+want, func() (bool, string) {
		for {
			select {
			case st := <-m.writer.set:
				if st.Namespace != ns || st.Name != name || len(st.Parents) == 0 {
					continue
				}
				for _, c := range st.Parents[0].Conditions {
					if c.Type == cond {
						last = string(c.Status) + "/" + c.Reason
					}
				}
				if last == want {
					return true, ""
				}
			default:
				return false, "last " + last
			}
		}
	})
}

// callList makes one List RPC of the health service and returns the
// address of the backend that served it.
func callList(cc *grpc.ClientConn) (string, error) {
	var p peer.Peer
	ctx, cancel := context.WithTimeout(context.Background(), grpctest.Wait)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).List(ctx, &healthpb.HealthListRequest{}, grpc.Peer(&p)); err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// TestGatewayAPIRoutesWithGRPCClients: HTTPRoutes and GRPCRoutes attached
// to Services (GAMMA) in a real API server steer real grpc-go xDS
// clients' RPCs: a producer route splits 3:1 between two Services, a
// consumer route applies to its namespace's clients alone, a backend of
// another namespace is refused until a ReferenceGrant allows it, a
// GRPCRoute sends one method elsewhere, and each change applies on the
// next RPCs without a restart.
func TestGatewayAPIRoutesWithGRPCClients(t *testing.T) {
	shop, web := env.Namespace(t, nil), env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.151", "127.0.0.152", "127.0.0.153", "127.0.0.154", "127.0.0.155")
	cart, cartV2, cartWeb, health, healthList := bs[0], bs[1], bs[2], bs[3], bs[4]
	port := int32(cart.Port)
	p := strconv.Itoa(int(port))
	for _, s := range []struct {
		ns, name string
		b        grpctest.Backend
	}{{shop, "cart", cart}, {shop, "cart-v2", cartV2}, {web, "cart-web", cartWeb}, {shop, "health", health}, {shop, "health-list", healthList},
		{shop, "orders", cart}} {
		createService(t, s.ns, s.name, port)
		writeSlice(t, s.ns, s.name, []grpctest.Backend{s.b})
	}
	m := startGatewayMesh(t, shop, web)
	target := "xds:///cart." + shop + ":" + p
	fromShop := grpctest.Channel(t, m.srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: shop, MapAddress: grpctest.DocToLoopback})
	fromWeb := grpctest.Channel(t, m.srv.XDSAddr(), target, grpctest.ChannelOptions{Namespace: web, MapAddress: grpctest.DocToLoopback, IP: "127.0.0.2"})
	grpctest.AwaitSpread(t, fromShop, cart)
	grpctest.AwaitSpread(t, fromWeb, cart)

	producer := func(cartWeight, v2Weight int) string {
		return `metadata: {name: cart, namespace: ` + shop + `}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, port: ` + p + `}]
  rules:
  - backendRefs: [{name: cart, port: ` + p + `, weight: ` + strconv.Itoa(cartWeight) + `}, {name: cart-v2, port: ` + p + `, weight: ` + strconv.Itoa(v2Weight) + `}]`
	}

	t.Run("a producer route splits 3:1 for every client", func(t *testing.T) {
		m.httpRoute(t, producer(3, 1))
		grpctest.AwaitSpread(t, fromShop, cart, cartV2)
		grpctest.AwaitSpread(t, fromWeb, cart, cartV2)
		const n = 2000
		counts := grpctest.CountRPCs(t, fromShop, n)
		share := float64(counts[cart.Addr]) / n
		t.Logf("cart served %d of %d RPCs (%.1f%%), cart-v2 %d", counts[cart.Addr], n, 100*share, counts[cartV2.Addr])
		if share < 0.70 || share > 0.80 || counts[cart.Addr]+counts[cartV2.Addr] != n {
			t.Errorf("cart served %.1f%% of the RPCs (counts %v), want 75%% ± 5", 100*share, counts)
		}
		m.awaitCondition(t, shop, "cart", "Accepted", "True/Accepted")
	})

	t.Run("a consumer route applies in its namespace only", func(t *testing.T) {
		m.httpRoute(t, `metadata: {name: cart-override, namespace: `+web+`}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: `+shop+`}]
  rules:
  - backendRefs: [{name: cart-web, port: `+p+`}]`)
		grpctest.AwaitSpread(t, fromWeb, cartWeb)
		grpctest.AwaitSpread(t, fromShop, cart, cartV2)

		// Alone on a Service, a consumer route still leaves the other
		// namespaces' clients on the Service's default route.
		orders := "xds:///orders." + shop + ":" + p
		ordersFromShop := grpctest.Channel(t, m.srv.XDSAddr(), orders, grpctest.ChannelOptions{Namespace: shop, MapAddress: grpctest.DocToLoopback})
		ordersFromWeb := grpctest.Channel(t, m.srv.XDSAddr(), orders, grpctest.ChannelOptions{Namespace: web, MapAddress: grpctest.DocToLoopback, IP: "127.0.0.2"})
		grpctest.AwaitSpread(t, ordersFromWeb, cart)
		m.httpRoute(t, `metadata: {name: orders-override, namespace: `+web+`}
spec:
  parentRefs: [{group: "", kind: Service, name: orders, namespace: `+shop+`}]
  rules:
  - backendRefs: [{name: cart-web, port: `+p+`}]`)
		grpctest.AwaitSpread(t, ordersFromWeb, cartWeb)
		for range 20 {
			if addr, err := grpctest.Call(context.Background(), ordersFromShop); err != nil || addr != cart.Addr {
				t.Fatalf("an RPC to orders from %s went to %s (%v), want %s", shop, addr, err, cart.Addr)
			}
		}
	})

	t.Run("a backend of another namespace needs a ReferenceGrant", func(t *testing.T) {
		m.httpRoute(t, `metadata: {name: cart-override, namespace: `+web+`}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: `+shop+`}]
  rules:
  - backendRefs: [{name: cart-v2, namespace: `+shop+`, port: `+p+`}]`)
		// Without a grant the backend is left out and the rule has
		// none: grpc-go fails its RPCs, as with istiod's 500.
		grpctest.AwaitUnavailable(t, fromWeb)
		m.awaitCondition(t, web, "cart-override", "ResolvedRefs", "False/RefNotPermitted")
		grant := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "web-routes", Namespace: shop}}
		grant.Spec.From = []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(web)}}
		grant.Spec.To = []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}}
		if _, err := m.client.GatewayV1beta1().ReferenceGrants(shop).Create(ctx(t), grant, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		grpctest.AwaitSpread(t, fromWeb, cartV2)
		m.awaitCondition(t, web, "cart-override", "ResolvedRefs", "True/ResolvedRefs")
		grpctest.AwaitSpread(t, fromShop, cart, cartV2)
	})

	t.Run("a route change applies without a restart", func(t *testing.T) {
		m.httpRoute(t, producer(0, 1))
		grpctest.AwaitSpread(t, fromShop, cartV2)
	})

	t.Run("a GRPCRoute sends one method elsewhere", func(t *testing.T) {
		healthTarget := "xds:///health." + shop + ":" + p
		cc := grpctest.Channel(t, m.srv.XDSAddr(), healthTarget, grpctest.ChannelOptions{Namespace: shop, MapAddress: grpctest.DocToLoopback})
		grpctest.AwaitSpread(t, cc, health)
		m.grpcRoute(t, `metadata: {name: health, namespace: `+shop+`}
spec:
  parentRefs: [{group: "", kind: Service, name: health}]
  rules:
  - matches: [{method: {service: grpc.health.v1.Health, method: List}}]
    backendRefs: [{name: health-list, port: `+p+`}]
  - backendRefs: [{name: health, port: `+p+`}]`)
		testenv.Eventually(t, "List served by health-list", func() (bool, string) {
			addr, err := callList(cc)
			return err == nil && addr == healthList.Addr, addr
		})
		for range 20 {
			if addr, err := callList(cc); err != nil || addr != healthList.Addr {
				t.Fatalf("List went to %s (%v), want %s", addr, err, healthList.Addr)
			}
		}
		grpctest.AwaitSpread(t, cc, health)
	})

	if n := m.srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
