package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// The Gateway API conformance suite's mesh profile (the module
// sigs.k8s.io/gateway-api/conformance, tests/mesh) runs its scenarios
// with echo pods and curl-like clients in a cluster. These tests
// reproduce each scenario here: its manifests (testdata/gamma, as the
// module has them) applied to a real API server with the Gateway API's
// CRDs, its echo pods grpc-go servers on loopback, its client a grpc-go
// xDS client of the scenario's namespace, and, for what only an HTTP
// proxy does (redirects, rewrites, header changes, query parameters),
// what an Envoy of that namespace receives.

// The conformance namespaces, as the scenarios' manifests name them.
const (
	gammaMeshNS     = "gateway-conformance-mesh"
	gammaConsumerNS = "gateway-conformance-mesh-consumer"
)

// echoServer is a conformance echo pod: a gRPC server that answers any
// method with its name (header x-echo-backend) and keeps each request as
// it arrived, path and metadata. A path of one segment ("/", "/v1") is not
// a gRPC method name: grpc-go's server ends it with Unimplemented before
// any handler runs, so the request is kept by a tap, which sees every
// stream first.
type echoServer struct {
	name string
	grpctest.Backend
	mu   sync.Mutex // guards seen
	seen map[string]echoRequest
}

// echoRequest is a request as an echo server received it.
type echoRequest struct {
	path string
	md   metadata.MD
}

// gammaCallID is the metadata key that ties a request to what the
// backend saw of it.
const gammaCallID = "x-gamma-call"

func (e *echoServer) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if ids := info.Header.Get(gammaCallID); len(ids) == 1 {
		e.mu.Lock()
		e.seen[ids[0]] = echoRequest{path: info.FullMethodName, md: info.Header.Copy()}
		e.mu.Unlock()
	}
	return ctx, nil
}

func (e *echoServer) request(id string) (echoRequest, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.seen[id]
	return r, ok
}

// startEcho starts an echo server on ip:port.
func startEcho(t *testing.T, name, ip string, port int) *echoServer {
	t.Helper()
	e := &echoServer{name: name, seen: map[string]echoRequest{}}
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.InTapHandle(e.tap), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var in emptypb.Empty
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		if err := stream.SetHeader(metadata.Pairs("x-echo-backend", name)); err != nil {
			return err
		}
		return stream.SendMsg(&emptypb.Empty{})
	}))
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	e.Backend = grpctest.Backend{IP: ip, Port: uint32(port), Addr: lis.Addr().String()}
	return e
}

// gammaMesh is the conformance suite's mesh base (its mesh manifests):
// namespace gateway-conformance-mesh with the Services echo (both
// versions), echo-v1 and echo-v2, each with the ports http 80, http-alt
// 8080 and grpc 7070, and gateway-conformance-mesh-consumer, where a
// client of the consumer namespace runs. Each echo pod is one server
// answering on every port.
type gammaMesh struct {
	*gatewayMesh
	mesh, consumer string // the test's namespaces standing for the suite's
	v1, v2         *echoServer
	byAddr         map[string]*echoServer
}

func startGAMMA(t *testing.T) *gammaMesh {
	t.Helper()
	mesh, consumer := env.Namespace(t, nil), env.Namespace(t, nil)
	port := grpctest.FreePort(t, "127.0.0.171", "127.0.0.172")
	g := &gammaMesh{mesh: mesh, consumer: consumer,
		v1: startEcho(t, "echo-v1", "127.0.0.171", port), v2: startEcho(t, "echo-v2", "127.0.0.172", port)}
	g.byAddr = map[string]*echoServer{g.v1.Addr: g.v1, g.v2.Addr: g.v2}
	for name, pods := range map[string][]*echoServer{"echo": {g.v1, g.v2}, "echo-v1": {g.v1}, "echo-v2": {g.v2}} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mesh},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, AppProtocol: ptr.To("http")},
				{Name: "http-alt", Port: 8080, AppProtocol: ptr.To("http")},
				{Name: "grpc", Port: 7070},
			}},
		}
		if name == "echo" {
			svc.Spec.Ports[2].AppProtocol = ptr.To("kubernetes.io/h2c")
		}
		if _, err := env.Client.CoreV1().Services(mesh).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-slice", Namespace: mesh, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for _, p := range svc.Spec.Ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(int32(port))})
		}
		for _, e := range pods {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{docAddr(e.Backend)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		env.ApplyEndpointSlice(t, s)
	}
	g.gatewayMesh = startGatewayMesh(t, mesh, consumer)
	return g
}

// apply creates the routes of a scenario's manifest, its namespaces
// replaced by the test's.
func (g *gammaMesh) apply(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gamma", file))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), gammaConsumerNS, g.consumer)
	text = strings.ReplaceAll(text, gammaMeshNS, g.mesh)
	for doc := range strings.SplitSeq(text, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "HTTPRoute":
			g.httpRoute(t, doc)
		case "GRPCRoute":
			var r gatewayv1.GRPCRoute
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			if _, err := g.client.GatewayV1().GRPCRoutes(r.Namespace).Create(ctx(t), &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: a document of kind %q", file, meta.Kind)
		}
	}
}

// channel is a grpc-go xDS channel of namespace ns to host:port (host as
// the scenario's client writes it: "echo", "echo-v1.<namespace>").
func (g *gammaMesh) channel(t *testing.T, ns, host string, port int) *grpc.ClientConn {
	t.Helper()
	return grpctest.Channel(t, g.srv.XDSAddr(), "xds:///"+host+":"+strconv.Itoa(port), grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
}

// echoReply is what a call learnt: the echo server that received it and
// the request as it received it.
type echoReply struct {
	backend string
	req     echoRequest
	err     error
}

var gammaCalls atomic.Int64

// call makes one RPC of path with metadata md (key, value pairs). It
// reached its backend when the echo answered, or, for a path that is not
// a gRPC method name, when the echo's server refused it as such.
func (g *gammaMesh) call(cc *grpc.ClientConn, path string, md ...string) echoReply {
	return g.callWith(cc, path, nil, md...)
}

// callWith is call with call options.
func (g *gammaMesh) callWith(cc *grpc.ClientConn, path string, opts []grpc.CallOption, md ...string) echoReply {
	id := strconv.FormatInt(gammaCalls.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, append([]string{gammaCallID, id}, md...)...)
	var p peer.Peer
	err := cc.Invoke(ctx, path, &emptypb.Empty{}, &emptypb.Empty{}, append(opts, grpc.Peer(&p))...)
	if st := status.Convert(err); err != nil && !(st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "malformed method name")) {
		return echoReply{err: err}
	}
	e := g.byAddr[fmt.Sprint(p.Addr)]
	if e == nil {
		return echoReply{err: fmt.Errorf("answered by %v, no echo server", p.Addr)}
	}
	req, ok := e.request(id)
	if !ok {
		return echoReply{err: fmt.Errorf("%s answered but did not see request %s", e.name, id)}
	}
	return echoReply{backend: e.name, req: req}
}

// awaitBackend waits until path is served by want several times in a
// row, as the suite's clients wait for a consistent response, and
// returns the last reply.
func (g *gammaMesh) awaitBackend(t *testing.T, cc *grpc.ClientConn, want, path string, md ...string) echoReply {
	t.Helper()
	var last echoReply
	testenv.Eventually(t, path+" served by "+want, func() (bool, string) {
		for range 5 {
			last = g.call(cc, path, md...)
			if last.err != nil || last.backend != want {
				return false, fmt.Sprintf("served by %q, error %v", last.backend, last.err)
			}
		}
		return true, ""
	})
	return last
}

// awaitServed waits until path is served, by any echo, several times in
// a row.
func (g *gammaMesh) awaitServed(t *testing.T, cc *grpc.ClientConn, path string) {
	t.Helper()
	testenv.Eventually(t, path+" served", func() (bool, string) {
		for range 5 {
			if r := g.call(cc, path); r.err != nil {
				return false, r.err.Error()
			}
		}
		return true, ""
	})
}

// awaitFailure waits until path fails with code several times in a row.
func (g *gammaMesh) awaitFailure(t *testing.T, cc *grpc.ClientConn, code codes.Code, path string) {
	t.Helper()
	testenv.Eventually(t, path+" failing with "+code.String(), func() (bool, string) {
		for range 5 {
			r := g.call(cc, path)
			if status.Code(r.err) != code {
				return false, fmt.Sprintf("served by %q, error %v", r.backend, r.err)
			}
		}
		return true, ""
	})
}

// split makes n RPCs of path and returns each echo's share.
func (g *gammaMesh) split(t *testing.T, cc *grpc.ClientConn, path string, n int) map[string]float64 {
	t.Helper()
	counts := map[string]int{}
	for range n {
		r := g.call(cc, path)
		if r.err != nil {
			t.Fatalf("RPC %s: %v", path, r.err)
		}
		counts[r.backend]++
	}
	share := map[string]float64{}
	for k, c := range counts {
		share[k] = float64(c) / float64(n)
	}
	return share
}

// awaitWeights checks the split of path against want as the suite does:
// 500 requests, each backend within 5 points of its weight, a few
// attempts (the suite allows ten).
func (g *gammaMesh) awaitWeights(t *testing.T, cc *grpc.ClientConn, path string, want map[string]float64) {
	t.Helper()
	const attempts, n, tolerance = 3, 500, 0.05
	for i := range attempts {
		got := g.split(t, cc, path, n)
		ok := len(got) == len(want)
		for k, w := range want {
			ok = ok && got[k] >= w-tolerance && got[k] <= w+tolerance
		}
		t.Logf("attempt %d: shares %v, want %v ± %.2f", i+1, got, want, tolerance)
		if ok {
			return
		}
	}
	t.Fatalf("the split never matched %v within %.2f in %d attempts", want, tolerance, attempts)
}

// envoy opens an ADS stream as an Envoy sidecar of namespace ns, which
// auto-ACKs what it receives; the caller subscribes.
func (g *gammaMesh) envoy(t *testing.T, ns string) *xdstest.TestClient {
	t.Helper()
	return xdstest.Dial(t, g.srv.XDSAddr(), xdstest.Options{AutoACK: true, Wait: grpctest.Wait,
		Node: xdstest.EnvoyNode(xdstest.NodeOptions{ID: xdstest.SidecarID("127.0.0.170", "envoy", ns), Namespace: ns})})
}

// routeName is the route configuration of a Service port of the mesh
// namespace.
func (g *gammaMesh) routeName(svc string, port int) string {
	return fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", port, svc, g.mesh)
}

// awaitEnvoyRoutes waits until the Envoy holds the route configuration
// name and ok holds of it, and checks every field rule of it.
func (g *gammaMesh) awaitEnvoyRoutes(t *testing.T, c *xdstest.TestClient, name, what string, ok func(*route.RouteConfiguration) bool) *route.RouteConfiguration {
	t.Helper()
	c.Subscribe(resource.RouteType, name)
	c.WaitUntil(name+": "+what, func() bool {
		rc := c.RouteConfiguration(name)
		return rc != nil && ok(rc)
	})
	rc := c.RouteConfiguration(name)
	if err := rc.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rc
}

// responseHeader returns the value r sets for response header name
// (compared without case, as HTTP does), and whether it sets it.
func responseHeader(r *route.Route, name string) (string, bool) {
	for _, h := range r.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetHeader().GetKey(), name) {
			return h.GetHeader().GetValue(), true
		}
	}
	return "", false
}

// onlyRoute returns the one route of rc, or nil when it has several.
func onlyRoute(rc *route.RouteConfiguration) *route.Route {
	if len(rc.GetVirtualHosts()) != 1 || len(rc.GetVirtualHosts()[0].GetRoutes()) != 1 {
		return nil
	}
	return rc.GetVirtualHosts()[0].GetRoutes()[0]
}

// setsHeader: rc's one route sets response header name to value.
func setsHeader(name, value string) func(*route.RouteConfiguration) bool {
	return func(rc *route.RouteConfiguration) bool {
		v, ok := responseHeader(onlyRoute(rc), name)
		return ok && v == value
	}
}

// setsNoHeader: rc's one route sets no response header name.
func setsNoHeader(name string) func(*route.RouteConfiguration) bool {
	return func(rc *route.RouteConfiguration) bool {
		r := onlyRoute(rc)
		_, ok := responseHeader(r, name)
		return r != nil && !ok
	}
}

// describeEnvoyRoutes writes each route of rc on one line, in order, for
// the scenarios to compare: "<match> -> <action>", where the match is the
// path ("=/x" exact, "^/x" a prefix of whole segments, "~/x" a prefix),
// then "?name=value" and "name=value" for query parameters and headers,
// and the action a cluster's Service name (or "name:weight" each), a
// redirect or a direct response, followed by rewrites and header changes.
func describeEnvoyRoutes(rc *route.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			var b strings.Builder
			m := r.GetMatch()
			switch {
			case m.GetPath() != "":
				b.WriteString("=" + m.GetPath())
			case m.GetPathSeparatedPrefix() != "":
				b.WriteString("^" + m.GetPathSeparatedPrefix())
			case m.GetPrefix() != "":
				b.WriteString("~" + m.GetPrefix())
			}
			for _, q := range m.GetQueryParameters() {
				fmt.Fprintf(&b, " ?%s=%s", q.GetName(), q.GetStringMatch().GetExact())
			}
			for _, h := range m.GetHeaders() {
				fmt.Fprintf(&b, " %s=%s", h.GetName(), h.GetStringMatch().GetExact())
			}
			b.WriteString(" ->")
			switch a := r.GetAction().(type) {
			case *route.Route_Route:
				if c := a.Route.GetCluster(); c != "" {
					b.WriteString(" " + clusterService(c))
				}
				for _, c := range a.Route.GetWeightedClusters().GetClusters() {
					fmt.Fprintf(&b, " %s:%d", clusterService(c.GetName()), c.GetWeight().GetValue())
				}
				if p := a.Route.GetPrefixRewrite(); p != "" {
					b.WriteString(" prefix-rewrite=" + p)
				}
				if rr := a.Route.GetRegexRewrite(); rr != nil {
					fmt.Fprintf(&b, " regex-rewrite=%s/%s", rr.GetPattern().GetRegex(), rr.GetSubstitution())
				}
			case *route.Route_Redirect:
				rd := a.Redirect
				fmt.Fprintf(&b, " redirect %s", rd.GetResponseCode())
				if rd.GetSchemeRedirect() != "" {
					b.WriteString(" scheme=" + rd.GetSchemeRedirect())
				}
				if rd.GetHostRedirect() != "" {
					b.WriteString(" host=" + rd.GetHostRedirect())
				}
				if rd.GetPortRedirect() != 0 {
					fmt.Fprintf(&b, " port=%d", rd.GetPortRedirect())
				}
				if rd.GetPathRedirect() != "" {
					b.WriteString(" path=" + rd.GetPathRedirect())
				}
				if rd.GetPrefixRewrite() != "" {
					b.WriteString(" prefix=" + rd.GetPrefixRewrite())
				}
			case *route.Route_DirectResponse:
				fmt.Fprintf(&b, " answer %d", a.DirectResponse.GetStatus())
			}
			for _, h := range r.GetRequestHeadersToAdd() {
				fmt.Fprintf(&b, " +%s=%s(%s)", h.GetHeader().GetKey(), h.GetHeader().GetValue(), h.GetAppendAction())
			}
			for _, h := range r.GetRequestHeadersToRemove() {
				b.WriteString(" -" + h)
			}
			out = append(out, b.String())
		}
	}
	return out
}

// clusterService is the Service name of an outbound cluster name.
func clusterService(cluster string) string {
	parts := strings.Split(cluster, "|")
	if len(parts) != 4 {
		return cluster
	}
	return strings.SplitN(parts[3], ".", 2)[0] + ":" + parts[1]
}

// awaitEnvoyEcho waits until an Envoy of the mesh namespace holds echo:80's
// route configuration as want describes it (describeEnvoyRoutes), and
// checks its field rules.
func (g *gammaMesh) awaitEnvoyEcho(t *testing.T, want ...string) {
	t.Helper()
	c := g.envoy(t, g.mesh)
	name := g.routeName("echo", 80)
	c.Subscribe(resource.RouteType, name)
	var got []string
	wait, cancel := context.WithTimeout(context.Background(), grpctest.Wait)
	defer cancel()
	if err := c.Await(wait, func() bool {
		got = describeEnvoyRoutes(c.RouteConfiguration(name))
		return slices.Equal(got, want)
	}); err != nil {
		t.Fatalf("%s: %v; holds\n%s\nwant\n%s", name, err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := c.RouteConfiguration(name).ValidateAll(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// awaitNoRouteAction waits until path fails as grpc-go fails a route it
// cannot follow (a redirect): UNAVAILABLE, naming the route's action.
func (g *gammaMesh) awaitNoRouteAction(t *testing.T, cc *grpc.ClientConn, path string) {
	t.Helper()
	testenv.Eventually(t, path+" failing on its route's action", func() (bool, string) {
		for range 5 {
			r := g.call(cc, path)
			if st := status.Convert(r.err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "route action") {
				return false, fmt.Sprintf("served by %q, error %v", r.backend, r.err)
			}
		}
		return true, ""
	})
}

// awaitReported waits until the route ns/name of kind (gwstatus.KindHTTPRoute,
// ...) is reported (as /debug/configz shows it) with exactly the fields
// grpc lists ignored for gRPC clients, and none for Envoy.
func (g *gammaMesh) awaitReported(t *testing.T, kind, ns, name string, grpc ...string) {
	t.Helper()
	testenv.Eventually(t, kind+" "+ns+"/"+name+" reported", func() (bool, string) {
		st, ok := g.status.Get(configstatus.Ref{Kind: kind, Namespace: ns, Name: name})
		if !ok {
			return false, "not reported"
		}
		var paths []string
		for _, f := range st.IgnoredGRPC {
			paths = append(paths, f.Path)
		}
		return st.Refused == nil && len(st.IgnoredEnvoy) == 0 && slices.Equal(paths, grpc),
			fmt.Sprintf("refused %v, ignored for gRPC %q, for Envoy %v", st.Refused, paths, st.IgnoredEnvoy)
	})
}
