package xds

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

func backendEndpoints(health map[string]model.Health, bs ...grpctest.Backend) []*model.Endpoint {
	var out []*model.Endpoint
	for _, b := range bs {
		out = append(out, &model.Endpoint{
			Address: b.IP, Port: b.Port, ServicePortName: "grpc", Health: health[b.IP],
			Locality: model.Locality{Region: "r1", Zone: "z" + b.IP[len(b.IP)-1:]},
		})
	}
	return out
}

func xdsChannel(t *testing.T, serverAddr, ns, target string) *grpc.ClientConn {
	return grpctest.Channel(t, serverAddr, target, grpctest.ChannelOptions{Namespace: ns})
}

// TestGRPCClients runs real grpc-go xDS clients against the server and
// real gRPC backends on 127.0.0.2-4.
func TestGRPCClients(t *testing.T) {
	b2, b3, b4 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0), grpctest.StartBackend(t, "127.0.0.4", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b2, b3, b4))
	ts := startServer(t, st)

	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	t.Run("spread over all healthy endpoints", func(t *testing.T) {
		grpctest.AwaitSpread(t, cc, b2, b3, b4)
	})
	t.Run("unhealthy and draining endpoints get no RPCs", func(t *testing.T) {
		st.Update(svc, backendEndpoints(map[string]model.Health{"127.0.0.3": model.Unhealthy}, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b2, b4)
		st.Update(svc, backendEndpoints(map[string]model.Health{"127.0.0.2": model.Draining}, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b3, b4)
	})
	t.Run("scale to zero gives Unavailable, scaling back recovers", func(t *testing.T) {
		st.Update(svc, nil)
		grpctest.AwaitUnavailable(t, cc)
		st.Update(svc, backendEndpoints(nil, b4))
		grpctest.AwaitSpread(t, cc, b4)
		st.Update(svc, backendEndpoints(nil, b2, b3, b4))
		grpctest.AwaitSpread(t, cc, b2, b3, b4)
	})
	t.Run("short and long names", func(t *testing.T) {
		for _, target := range []string{"xds:///echo.default:9080", "xds:///echo.default.svc:9080", "xds:///echo.default.svc.cluster.local:9080"} {
			grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "default", target), b2, b3, b4)
		}
		// From another namespace, name.namespace works. (That the bare
		// name does not is in the golden files: grpc-go only reports a
		// listener it never had as missing after a 15 s timer.)
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "other", "xds:///echo.default:9080"), b2, b3, b4)
	})
	t.Run("a new service appears to a new channel", func(t *testing.T) {
		st.Update(service("fresh", "apps", 7070), backendEndpoints(nil, b3))
		grpctest.AwaitSpread(t, xdsChannel(t, ts.addr, "apps", "xds:///fresh:7070"), b3)
	})
	t.Run("a deleted service disappears", func(t *testing.T) {
		st.Delete(svc.Hostname)
		grpctest.AwaitUnavailable(t, cc)
	})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
	if strings.Contains(ts.logs.String(), "level=ERROR") {
		t.Fatalf("server logged errors:\n%s", ts.logs.String())
	}
}

// TestGRPCTrafficFollowsHealthyEndpoints: two zones of four pods, three of
// zone a's terminating (DRAINING). grpc-go picks a locality by its weight
// alone, then round robin inside it, so each of the five HEALTHY pods must
// get a fifth of the RPCs: zone a's last ready pod must not take half of
// them for the pods going away.
func TestGRPCTrafficFollowsHealthyEndpoints(t *testing.T) {
	var zoneA, zoneB []grpctest.Backend
	for i := range 4 {
		zoneA = append(zoneA, grpctest.StartBackend(t, "127.0.0."+itoa(2+i), 0))
		zoneB = append(zoneB, grpctest.StartBackend(t, "127.0.0."+itoa(6+i), 0))
	}
	var eps []*model.Endpoint
	add := func(zone string, b grpctest.Backend, h model.Health) {
		eps = append(eps, &model.Endpoint{Address: b.IP, Port: b.Port, ServicePortName: "grpc", Health: h,
			Locality: model.Locality{Region: "r1", Zone: zone}})
	}
	add("a", zoneA[0], model.Healthy)
	for _, b := range zoneA[1:] {
		add("a", b, model.Draining)
	}
	for _, b := range zoneB {
		add("b", b, model.Healthy)
	}
	st := model.NewStore()
	st.Update(service("echo", "default", 9080), eps)
	ts := startServer(t, st)
	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	healthy := append([]grpctest.Backend{zoneA[0]}, zoneB...)
	grpctest.AwaitSpread(t, cc, healthy...)

	// The number of RPCs zone a gets is binomial(n, 1/5) (grpc-go's
	// weighted_target picks a locality at random by weight): with n = 4000
	// its share has a standard deviation of 0.63 points, so a tolerance of
	// 3 points is 4.7 deviations (a false failure about 3 times in a
	// million). Zone b's pods split their locality's share round robin and
	// deviate a quarter as much. Weights that counted every endpoint (4 and
	// 4) would give zone a's ready pod 50%.
	const n, tolerance = 4000, 0.03
	counts := grpctest.CountRPCs(t, cc, n)
	for _, b := range zoneA[1:] {
		if counts[b.Addr] != 0 {
			t.Errorf("draining %s served %d RPCs", b.Addr, counts[b.Addr])
		}
	}
	for _, b := range healthy {
		share := float64(counts[b.Addr]) / n
		if share < 0.2-tolerance || share > 0.2+tolerance {
			t.Errorf("%s served %.1f%% of the RPCs, want 20%% ± %.0f points (counts %v)", b.Addr, 100*share, 100*tolerance, counts)
		}
	}
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs:\n%s", n, ts.logs.String())
	}
}

// TestGRPCGoLocalityRules pins what grpc-go does with the shapes of
// ClusterLoadAssignment the generator chooses between, by serving
// hand-made ones to a real client: a locality with weight 0 or no weight
// is dropped without a NACK, a locality entry without its locality field
// is NACKed (the client keeps its previous endpoints), and with every
// locality dropped RPCs fail with Unavailable.
func TestGRPCGoLocalityRules(t *testing.T) {
	a, b := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, nil)
	g := serve(st)
	name := model.ClusterName(9080, "", svc.Hostname)
	grpcClient := translate.Client{Namespace: "default", GRPC: true}

	caches := map[string]*cache.LinearCache{}
	for _, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
		caches[typ] = cache.NewLinearCache(typ)
	}
	set := func(typ, name string, m types.Resource) {
		t.Helper()
		if err := caches[typ].UpdateResource(name, m); err != nil {
			t.Fatal(err)
		}
	}
	set(resource.ListenerType, "echo:9080", g.listener(t, grpcClient, "echo:9080"))
	set(resource.RouteType, name, g.route(t, name))
	set(resource.ClusterType, name, g.cluster(t, name))
	mux := &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cache.Cache{},
	}
	for typ, c := range caches {
		mux.Caches[typ] = c
	}
	var nacks atomic.Int64
	xs := serverv3.NewServer(context.Background(), mux, serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			if r.GetErrorDetail() != nil {
				nacks.Add(1)
			}
			return nil
		},
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, xs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	locality := func(zone string, weight *wrapperspb.UInt32Value, be grpctest.Backend) *endpoint.LocalityLbEndpoints {
		return &endpoint.LocalityLbEndpoints{
			Locality:            &core.Locality{Region: "r1", Zone: zone},
			LoadBalancingWeight: weight,
			LbEndpoints: []*endpoint.LbEndpoint{{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{Address: &core.Address_SocketAddress{
					SocketAddress: &core.SocketAddress{Protocol: core.SocketAddress_TCP, Address: be.IP, PortSpecifier: &core.SocketAddress_PortValue{PortValue: be.Port}},
				}}}},
				HealthStatus: core.HealthStatus_HEALTHY,
			}},
		}
	}
	setCLA := func(ls ...*endpoint.LocalityLbEndpoints) {
		t.Helper()
		set(resource.EndpointType, name, &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: ls})
	}
	both := func() {
		t.Helper()
		setCLA(locality("a", wrapperspb.UInt32(1), a), locality("b", wrapperspb.UInt32(1), b))
	}

	both()
	cc := xdsChannel(t, lis.Addr().String(), "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, a, b)

	t.Run("weight 0 drops the locality", func(t *testing.T) {
		setCLA(locality("a", wrapperspb.UInt32(0), a), locality("b", wrapperspb.UInt32(1), b))
		grpctest.AwaitSpread(t, cc, b)
		both()
		grpctest.AwaitSpread(t, cc, a, b)
	})
	t.Run("no weight drops the locality", func(t *testing.T) {
		setCLA(locality("a", nil, a), locality("b", wrapperspb.UInt32(1), b))
		grpctest.AwaitSpread(t, cc, b)
		both()
		grpctest.AwaitSpread(t, cc, a, b)
	})
	t.Run("every locality dropped: Unavailable", func(t *testing.T) {
		setCLA(locality("a", nil, a), locality("b", wrapperspb.UInt32(0), b))
		grpctest.AwaitUnavailable(t, cc)
		both()
		grpctest.AwaitSpread(t, cc, a, b)
	})
	if n := nacks.Load(); n != 0 {
		t.Fatalf("%d NACKs for weights 0 and unset", n)
	}
	t.Run("an entry without its locality is NACKed", func(t *testing.T) {
		noID := locality("a", wrapperspb.UInt32(1), a)
		noID.Locality = nil
		setCLA(noID, locality("b", wrapperspb.UInt32(1), b))
		awaitCount(t, &nacks, 1, "a NACK")
		grpctest.AwaitSpread(t, cc, a, b) // the previous endpoints are kept
	})
}
