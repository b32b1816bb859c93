package e2e

import (
	"encoding/json"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestPortLevelSettingsReplaceTheTopLevel: with a real API server, a
// DestinationRule whose top level says ISTIO_MUTUAL and
// http2MaxRequests 100 and whose settings for the service's port say
// only LEAST_REQUEST gives that port least request, no request limit
// and plaintext, as istiod does: a real grpc-go client with xDS
// credentials and the mesh's certificates reaches the plaintext backends.
// Once the port-level settings name another port, the top level applies
// to the service's port again: the client tries mutual TLS and the
// plaintext backends fail it.
func TestPortLevelSettingsReplaceTheTopLevel(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.61", "127.0.0.62")
	createService(t, ns, "ports", 9080)
	writeSlice(t, ns, "ports", bs)
	srv := startObserved(t, ns, server.Options{Policies: startPolicies(t, ns)})

	leastRequestOn := func(port uint32) *apinetworking.DestinationRule {
		return &apinetworking.DestinationRule{
			Host: "ports",
			TrafficPolicy: &apinetworking.TrafficPolicy{
				ConnectionPool: &apinetworking.ConnectionPoolSettings{Http: &apinetworking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 100}},
				Tls:            &apinetworking.ClientTLSSettings{Mode: apinetworking.ClientTLSSettings_ISTIO_MUTUAL},
				PortLevelSettings: []*apinetworking.TrafficPolicy_PortTrafficPolicy{{
					Port: &apinetworking.PortSelector{Number: port},
					LoadBalancer: &apinetworking.LoadBalancerSettings{
						LbPolicy: &apinetworking.LoadBalancerSettings_Simple{Simple: apinetworking.LoadBalancerSettings_LEAST_REQUEST}},
				}},
			},
		}
	}
	rules, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := rules.NetworkingV1().DestinationRules(ns)
	dr, err := api.Create(ctx(t), &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: "ports", Namespace: ns},
		Spec:       *leastRequestOn(9080),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// What a gRPC client is sent for the port: checked first, so that a
	// failure names the field rather than an RPC error.
	name := model.ClusterName(9080, "", model.ServiceHostname("ports", ns, ""))
	c := xdstest.Dial(t, srv.XDSAddr(), xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: "watcher", Namespace: ns}), AutoACK: true, Wait: grpctest.Wait})
	c.Subscribe(resource.ClusterType, name)
	c.WaitUntil("least request on port 9080", func() bool {
		cl := c.Cluster(name)
		return cl != nil && cl.GetLbPolicy() == cluster.Cluster_LEAST_REQUEST
	})
	if cl := c.Cluster(name); cl.GetTransportSocket() != nil || cl.GetCircuitBreakers() != nil {
		t.Fatalf("port 9080 keeps the top level's TLS or limit: %v", cl)
	}

	ca := testpki.New(t)
	cert, key := ca.Issue(t, testpki.Leaf{Name: "client", URIs: []string{"spiffe://cluster.local/ns/" + ns + "/sa/client"}})
	cfg, err := bootstrap.Build(bootstrap.Options{XDSServer: srv.XDSAddr(), Namespace: ns, Pod: "client-1", Cert: cert, Key: key, CACert: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.XDSServers {
		// The mesh's certificates for the data plane; plaintext to the
		// test's xDS server.
		cfg.XDSServers[i].ChannelCreds = []bootstrap.ChannelCreds{{Type: "insecure"}}
	}
	doc, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	channel := func() *grpc.ClientConn {
		return grpctest.ChannelWithBootstrap(t, "xds:///ports:9080", doc,
			grpctest.ChannelOptions{MapAddress: grpctest.DocToLoopback, XDSCredentials: true})
	}
	grpctest.AwaitSpread(t, channel(), bs...)

	dr.Spec = *leastRequestOn(9999)
	if _, err := api.Update(ctx(t), dr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitUntil("ISTIO_MUTUAL on port 9080", func() bool { return c.Cluster(name).GetTransportSocket() != nil })
	// A connection is secured once, when it is made: a new channel makes
	// new ones, and the plaintext backends fail its handshakes.
	grpctest.AwaitUnavailable(t, channel())
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("%d NACKs", n)
	}
}
