package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// FuzzADS plays a script of xDS requests, decoded from the fuzzer's
// bytes, against a Server over a real gRPC connection (in memory, so
// that each input costs no socket): state of the world and delta ADS
// streams and the per-type streams, with any type URL, resource names,
// nonces and versions (the last ones received, or any text), NACKs, node
// ids and metadata, subscriptions and unsubscriptions in any order, and
// pushes in between. Whatever the script, the server does not panic,
// every response is well formed (a nonce, a type URL the stream asked
// for, resources of that type that decode), every stream ends when its
// client closes it, or earlier with a gRPC status that says why (not
// Unknown or Internal), closed streams leave nothing behind, and a
// well-formed client still gets its configuration afterwards.
//
// The script is one instruction per line (fuzzScript documents them);
// the seeds are what grpc-go and Envoy send, and the mistakes a broken
// client makes.
func FuzzADS(f *testing.F) {
	for _, s := range fuzzADSSeeds {
		f.Add([]byte(s))
	}
	store := fuzzADSStore()
	f.Fuzz(func(t *testing.T, script []byte) {
		h := newFuzzHarness(t, store)
		h.play(parseFuzzScript(script))
		h.checkUsable()
	})
}

// fuzzADSSeeds are scripts (see fuzzScript) of well-behaved and broken
// clients.
var fuzzADSSeeds = []string{
	// grpc-go: a listener, then its route, cluster and endpoints, each
	// ACKed with the version and nonce received.
	"i grpc-client\nm NAMESPACE=demo\nm GENERATOR=grpc\nu gRPC Go\n" +
		"t L\n+ greeter:7070\n.\nw\nv $\nn $\n+ greeter:7070\n.\n" +
		"t R\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\nw\n" +
		"t C\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\nw\n" +
		"t E\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\nw\nv $\nn $\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\n",
	// A NACK, then a push.
	"i grpc-client\nm NAMESPACE=demo\nm GENERATOR=grpc\nt C\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\nw\nn $\ne bad cluster\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\np\nw\n",
	// Envoy: wildcard clusters and endpoints, then everything by name.
	"i sidecar~10.0.0.7~envoy-1.demo~demo.svc.cluster.local\nu envoy\nt C\n.\nw\nv $\nn $\n.\nt E\n.\nw\nt L\n.\nw\nt R\n.\nw\n",
	// A gRPC server asking for its inbound listener.
	"i sidecar~10.0.0.7~greeter-1.demo~demo.svc.cluster.local\nm GENERATOR=grpc\nm INSTANCE_IPS=10.0.0.7\nt L\n+ xds.istio.io/grpc/lds/inbound/0.0.0.0:7070\n+ xds.istio.io/grpc/lds/inbound/[::]:7070\n.\nw\n",
	// Delta: subscribe, unsubscribe, resubscribe, with initial versions.
	"=d\ni delta-client\nm NAMESPACE=demo\nt E\n+ outbound|7070||greeter.demo.svc.cluster.local\n+ outbound|9080||reviews.default.svc.cluster.local\n.\nw\nn $\n- outbound|9080||reviews.default.svc.cluster.local\n.\nr outbound|7070||greeter.demo.svc.cluster.local=v1\n+ *\n.\nw\n",
	"=d\ni delta-client\nt C\n+ *\n.\nw\nn $\ne NACK\n.\n- *\n.\nt L\n+ greeter.demo.svc:7070\n.\nw\n",
	// Per-type streams.
	"=C\ni envoy-2\nt C\n.\nw\n", "=E\ni envoy-3\nt E\n+ outbound|7070||greeter.demo.svc.cluster.local\n.\nw\n",
	"=L\ni x\n.\n", "=R\ni x\nt R\n+ outbound|9080||reviews.default.svc.cluster.local\n.\nw\n",
	// Mistakes: no type URL, an unknown type, a stale nonce, unknown and
	// malformed names, odd metadata, two streams one after the other.
	"i a\n.\n", "i a\nt type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\n+ default\n.\nw\n",
	"i a\nt L\n+ greeter:7070\n.\nn 12345\nv nope\n+ other:1\n.\nw\n",
	"i a\nm NAMESPACE=\nM {\"NAMESPACE\": 7, \"INSTANCE_IPS\": [\"x\"], \"GENERATOR\": {\"a\": null}}\nt L\n+ :\n+ greeter:0\n+ greeter:99999\n+ outbound|||\n.\nw\n",
	"i a\nc remote\nl region/zone/subzone\nm CLUSTER_ID=remote\nt E\n+ outbound|0||x\n+ outbound|7070|v1|greeter.demo.svc.cluster.local\n.\n=d\ni b\nt R\n- never-subscribed\n.\n",
}

// fuzzADSStore is the model every fuzzed server serves: two services with
// endpoints, in two namespaces.
func fuzzADSStore() *model.Store {
	st := model.NewStore()
	greeter := service("greeter", "demo", 7070)
	greeterEps := endpoints(7070, model.Healthy, "10.0.0.7", "10.0.0.8")
	greeterEps[0].Locality = model.Locality{Region: "region", Zone: "zone"}
	greeterEps[1].Health = model.Draining
	st.Update(greeter, greeterEps)
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.1.1"))
	return st
}

// fuzzScript is a decoded script: one instruction per line, the first
// character says which, the rest (after one optional space) is its
// argument.
//
//	=s =d =L =R =C =E  open a new stream (closing the current one): state
//	                   of the world ADS, delta ADS, or a per-type stream;
//	                   without one, the script starts on a state of the
//	                   world ADS stream
//	t URL     the type URL of the next requests; L, R, C, E and S stand
//	          for listeners, routes, clusters, endpoints and secrets
//	+ name    a name to subscribe to (state of the world: to ask for)
//	- name    a name to unsubscribe from (delta)
//	r n=v     an initial resource version (delta)
//	n nonce   the response nonce; $ is the last one received of the type
//	v version the version (state of the world); $ is the last received
//	e text    an error detail: the request is a NACK
//	i id, c cluster, l region/zone/subzone, u user agent,
//	m K=V (a metadata string), M JSON (the whole metadata)
//	          the node, sent with the stream's first request and after N
//	N         send the node with the next request
//	.         send the request, then start a new one of the same type
//	w         wait a little for a response
//	p         push: everything may have changed
type fuzzScript []fuzzOp

type fuzzOp struct {
	op  byte
	arg string
}

// maxFuzzOps bounds a script, so that an input costs a bounded time.
const maxFuzzOps = 200

func parseFuzzScript(b []byte) fuzzScript {
	var s fuzzScript
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		// The Go client cannot marshal a string that is not UTF-8; what a
		// client of another language might send that way is refused by
		// gRPC before the server sees it
		// (TestMalformedRequestIsRefusedByGRPC).
		arg := strings.ToValidUTF8(strings.TrimPrefix(line[1:], " "), "\uFFFD")
		s = append(s, fuzzOp{op: line[0], arg: arg})
		if len(s) == maxFuzzOps {
			break
		}
	}
	return s
}

var fuzzTypeAliases = map[string]string{
	"L": resource.ListenerType, "R": resource.RouteType, "C": resource.ClusterType, "E": resource.EndpointType,
	"S": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
}

// fuzzHarness is one Server behind an in-memory gRPC connection, and the
// stream a script is playing on.
type fuzzHarness struct {
	t      *testing.T
	server *Server
	cc     *grpc.ClientConn

	st *fuzzStream // the current stream; nil before the first
	// wait bounds each w instruction: short when fuzzing (a wait for a
	// response that never comes costs all of it), long in a test that
	// expects every response it waits for.
	wait time.Duration

	// What the script's streams got, for TestFuzzADSScriptsReachTheServer:
	// responses by type URL, and how each stream ended.
	responses map[string]int
	ends      []codes.Code
}

func newFuzzHarness(t *testing.T, store *model.Store) *fuzzHarness {
	s := NewServer(Options{Discovery: store, Logger: slog.New(slog.DiscardHandler)})
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	cc, err := grpc.NewClient("passthrough:///fuzz",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		g.Stop()
	})
	return &fuzzHarness{t: t, server: s, cc: cc, wait: 20 * time.Millisecond, responses: map[string]int{}}
}

// fuzzStream is one stream of a script and what it received.
type fuzzStream struct {
	kind   byte // s, d, L, R, C or E
	cancel context.CancelFunc
	send   func(req *fuzzRequest) error
	close  func() error

	nodeSent bool
	done     chan struct{} // closed when the receive loop ends; err is set

	mu       sync.Mutex          // guards the fields below
	asked    map[string]bool     // type URLs requested
	last     map[string]received // by type URL
	count    map[string]int      // responses by type URL
	latest   chan struct{}       // capacity 1: a response arrived
	problems []string
	err      error // how the stream ended
}

type received struct{ nonce, version string }

// fuzzRequest is a request being written, of either protocol.
type fuzzRequest struct {
	typeURL, nonce, version string
	names, unsubscribe      []string
	initial                 map[string]string
	nack                    *statuspb.Status
	node                    *core.Node
}

func (h *fuzzHarness) open(kind byte) {
	h.closeStream()
	ctx, cancel := context.WithCancel(context.Background())
	st := &fuzzStream{kind: kind, cancel: cancel, done: make(chan struct{}), asked: map[string]bool{},
		last: map[string]received{}, count: map[string]int{}, latest: make(chan struct{}, 1)}
	var err error
	switch kind {
	case 'd':
		var c discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
		c, err = discovery.NewAggregatedDiscoveryServiceClient(h.cc).DeltaAggregatedResources(ctx)
		if err == nil {
			st.send = func(r *fuzzRequest) error {
				return c.Send(&discovery.DeltaDiscoveryRequest{Node: r.node, TypeUrl: r.typeURL, ResponseNonce: r.nonce,
					ResourceNamesSubscribe: r.names, ResourceNamesUnsubscribe: r.unsubscribe,
					InitialResourceVersions: r.initial, ErrorDetail: r.nack})
			}
			st.close = c.CloseSend
			go receive(st, c.Recv, st.deltaResponse)
		}
	default:
		var c grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
		switch kind {
		case 'L':
			c, err = listenerservice.NewListenerDiscoveryServiceClient(h.cc).StreamListeners(ctx)
		case 'R':
			c, err = routeservice.NewRouteDiscoveryServiceClient(h.cc).StreamRoutes(ctx)
		case 'C':
			c, err = clusterservice.NewClusterDiscoveryServiceClient(h.cc).StreamClusters(ctx)
		case 'E':
			c, err = endpointservice.NewEndpointDiscoveryServiceClient(h.cc).StreamEndpoints(ctx)
		default:
			c, err = discovery.NewAggregatedDiscoveryServiceClient(h.cc).StreamAggregatedResources(ctx)
		}
		if err == nil {
			st.send = func(r *fuzzRequest) error {
				return c.Send(&discovery.DiscoveryRequest{Node: r.node, TypeUrl: r.typeURL, ResponseNonce: r.nonce,
					VersionInfo: r.version, ResourceNames: r.names, ErrorDetail: r.nack})
			}
			st.close = c.CloseSend
			go receive(st, c.Recv, st.sotwResponse)
		}
	}
	if err != nil {
		cancel()
		h.t.Fatalf("opening a stream: %v", err)
	}
	h.st = st
}

// perTypeURL is the type a per-type stream serves.
var perTypeURL = map[byte]string{'L': resource.ListenerType, 'R': resource.RouteType, 'C': resource.ClusterType, 'E': resource.EndpointType}

// received records a response and checks it: a nonce, a type URL the
// stream asked for (a per-type stream's own when its requests named
// none), resources of that type that decode.
func (st *fuzzStream) received(typeURL, nonce, version string, resources []*anypb.Any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	bad := func(format string, args ...any) {
		st.problems = append(st.problems, fmt.Sprintf("a response of type %q: ", typeURL)+fmt.Sprintf(format, args...))
	}
	if nonce == "" {
		bad("no nonce")
	}
	if !st.asked[typeURL] && typeURL != perTypeURL[st.kind] {
		bad("a type the stream never asked for")
	}
	for _, a := range resources {
		if a.GetTypeUrl() != typeURL {
			bad("holds a resource of type %q", a.GetTypeUrl())
			continue
		}
		if _, err := a.UnmarshalNew(); err != nil {
			bad("holds a resource that does not decode: %v", err)
		}
	}
	st.last[typeURL] = received{nonce: nonce, version: version}
	st.count[typeURL]++
	select {
	case st.latest <- struct{}{}:
	default:
	}
}

// receive reads a stream's responses until it ends, handing each to
// handle.
func receive[R any](st *fuzzStream, recv func() (R, error), handle func(R)) {
	defer close(st.done)
	for {
		r, err := recv()
		if err != nil {
			st.ended(err)
			return
		}
		handle(r)
	}
}

func (st *fuzzStream) sotwResponse(r *discovery.DiscoveryResponse) {
	if r.GetVersionInfo() == "" {
		st.problem(fmt.Sprintf("a response of type %q without a version", r.GetTypeUrl()))
	}
	st.received(r.GetTypeUrl(), r.GetNonce(), r.GetVersionInfo(), r.GetResources())
}

func (st *fuzzStream) deltaResponse(r *discovery.DeltaDiscoveryResponse) {
	resources := make([]*anypb.Any, 0, len(r.GetResources()))
	for _, res := range r.GetResources() {
		if res.GetName() == "" || res.GetVersion() == "" {
			st.problem(fmt.Sprintf("a delta resource of type %q without a name or version: %v", r.GetTypeUrl(), res))
		}
		resources = append(resources, res.GetResource())
	}
	st.received(r.GetTypeUrl(), r.GetNonce(), r.GetSystemVersionInfo(), resources)
}

func (st *fuzzStream) problem(p string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.problems = append(st.problems, p)
}

func (st *fuzzStream) ended(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.err = err
}

// fuzzRefusalCodes are the codes with which the server may end a stream it
// refuses: each says what the client did wrong or what it exceeded.
var fuzzRefusalCodes = map[codes.Code]bool{
	codes.InvalidArgument: true, codes.ResourceExhausted: true, codes.PermissionDenied: true,
}

// closeStream ends the current stream from the client's side and checks
// how it went.
func (h *fuzzHarness) closeStream() {
	st := h.st
	if st == nil {
		return
	}
	h.st = nil
	_ = st.close()
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		st.cancel()
		h.t.Fatal("the server did not end a stream its client had closed within 10s")
	}
	st.cancel()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.problems) > 0 {
		h.t.Fatalf("malformed responses:\n%s", strings.Join(st.problems, "\n"))
	}
	for typeURL, n := range st.count {
		h.responses[typeURL] += n
	}
	if errors.Is(st.err, io.EOF) {
		h.ends = append(h.ends, codes.OK)
		return
	}
	s, ok := status.FromError(st.err)
	if !ok || !fuzzRefusalCodes[s.Code()] {
		h.t.Fatalf("the stream ended with %v, not a refusal", st.err)
	}
	h.ends = append(h.ends, s.Code())
}

// maxFuzzWaits bounds the waits of a script: a wait for a response that
// never comes costs its whole time.
const maxFuzzWaits = 8

func (h *fuzzHarness) play(script fuzzScript) {
	var (
		node     = &core.Node{}
		sendNode bool
		req      = &fuzzRequest{}
		typeURL  string
		waits    int
	)
	ensureStream := func() {
		if h.st == nil {
			h.open('s')
		}
	}
	for _, op := range script {
		switch op.op {
		case '=':
			kind := byte('s')
			if op.arg != "" && strings.ContainsRune("sdLRCE", rune(op.arg[0])) {
				kind = op.arg[0]
			}
			h.open(kind)
			req = &fuzzRequest{}
		case 't':
			typeURL = op.arg
			if full, ok := fuzzTypeAliases[op.arg]; ok {
				typeURL = full
			}
		case '+':
			req.names = append(req.names, op.arg)
		case '-':
			req.unsubscribe = append(req.unsubscribe, op.arg)
		case 'r':
			name, version, _ := strings.Cut(op.arg, "=")
			if req.initial == nil {
				req.initial = map[string]string{}
			}
			req.initial[name] = version
		case 'n', 'v':
			ensureStream()
			v := op.arg
			if v == "$" {
				h.st.mu.Lock()
				last := h.st.last[typeURL]
				h.st.mu.Unlock()
				v = last.version
				if op.op == 'n' {
					v = last.nonce
				}
			}
			if op.op == 'n' {
				req.nonce = v
			} else {
				req.version = v
			}
		case 'e':
			req.nack = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: op.arg}
		case 'i':
			node.Id = op.arg
		case 'c':
			node.Cluster = op.arg
		case 'l':
			parts := strings.SplitN(op.arg, "/", 3)
			parts = append(parts, "", "")
			node.Locality = &core.Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}
		case 'u':
			node.UserAgentName = op.arg
		case 'm':
			k, v, _ := strings.Cut(op.arg, "=")
			if node.Metadata == nil {
				node.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			}
			node.Metadata.Fields[k] = structpb.NewStringValue(v)
		case 'M':
			md := &structpb.Struct{}
			if protojson.Unmarshal([]byte(op.arg), md) == nil {
				node.Metadata = md
			}
		case 'N':
			sendNode = true
		case '.':
			ensureStream()
			st := h.st
			req.typeURL = typeURL
			if !st.nodeSent || sendNode {
				req.node = node
				st.nodeSent, sendNode = true, false
			}
			st.mu.Lock()
			st.asked[typeURL] = true
			st.mu.Unlock()
			if err := st.send(req); err != nil {
				// The server ended the stream: closeStream says how.
				h.closeStream()
			}
			req = &fuzzRequest{}
		case 'w':
			if h.st == nil || waits == maxFuzzWaits {
				continue
			}
			waits++
			select {
			case <-h.st.latest:
			case <-h.st.done:
			case <-time.After(h.wait):
			}
		case 'p':
			h.server.Push(push.Request{Full: true})
		}
	}
	h.closeStream()
}

// checkUsable: the streams the script opened are gone from the server's
// client list, and a well-formed gRPC client gets its listener and
// endpoints.
func (h *fuzzHarness) checkUsable() {
	deadline := time.Now().Add(10 * time.Second)
	for len(h.server.Clients()) > 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("closed streams are still listed: %+v", h.server.Clients())
		}
		time.Sleep(time.Millisecond)
	}
	c := xdstest.Connect(h.t, h.cc, xdstest.Options{Node: grpcNode("fresh", "demo"), AutoACK: true, Wait: 10 * time.Second})
	c.Subscribe(resource.ListenerType, "greeter:7070")
	c.WaitFor(resource.ListenerType, "greeter:7070")
	eds := model.ClusterName(7070, "", "greeter.demo.svc.cluster.local")
	c.Subscribe(resource.EndpointType, eds)
	c.WaitFor(resource.EndpointType, eds)
}

// TestFuzzADSScriptsReachTheServer keeps FuzzADS honest: scripts of
// well-behaved clients get their configuration, and broken ones are
// refused as the protocol says.
func TestFuzzADSScriptsReachTheServer(t *testing.T) {
	store := fuzzADSStore()
	for _, tc := range []struct {
		script string
		types  []string
		ends   []codes.Code
	}{
		{fuzzADSSeeds[0], []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType}, []codes.Code{codes.OK}},
		{fuzzADSSeeds[4], []string{resource.EndpointType}, []codes.Code{codes.OK}},
		{"=C\ni envoy\nt C\n.\nw\n", []string{resource.ClusterType}, []codes.Code{codes.OK}},
		{"i a\n.\n", nil, []codes.Code{codes.InvalidArgument}},
		{"i a\nt L\n.\nw\n=d\nt C\n+ *\n.\nw\n", []string{resource.ListenerType, resource.ClusterType}, []codes.Code{codes.OK, codes.OK}},
	} {
		h := newFuzzHarness(t, store)
		h.wait = 10 * time.Second
		h.play(parseFuzzScript([]byte(tc.script)))
		for _, typ := range tc.types {
			if h.responses[typ] == 0 {
				t.Errorf("%q: no response of type %s; got %v", tc.script, typ, h.responses)
			}
		}
		if !slices.Equal(h.ends, tc.ends) {
			t.Errorf("%q: streams ended with %v, want %v", tc.script, h.ends, tc.ends)
		}
		h.checkUsable()
	}
}

// TestMalformedRequestIsRefusedByGRPC: a request that is no
// DiscoveryRequest (here a resource name that is not UTF-8, which the Go
// client cannot send but the wire carries) ends its stream with gRPC's
// own Internal status, before the server sees it, and the server goes on
// serving.
func TestMalformedRequestIsRefusedByGRPC(t *testing.T) {
	h := newFuzzHarness(t, fuzzADSStore())
	st, err := h.cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		"/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources", grpc.ForceCodec(wireCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	var req []byte // DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: ["\x91"]}
	req = protowire.AppendTag(req, 4, protowire.BytesType)
	req = protowire.AppendString(req, resource.ClusterType)
	req = protowire.AppendTag(req, 3, protowire.BytesType)
	req = protowire.AppendString(req, "\x91")
	if err := st.SendMsg(req); err != nil {
		t.Fatal(err)
	}
	err = st.RecvMsg(&discovery.DiscoveryResponse{})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "invalid UTF-8") {
		t.Fatalf("the stream ended with %v, want gRPC's Internal for a message it cannot parse", err)
	}
	h.checkUsable()
}

// wireCodec sends bytes as they are, so that a test can write what no
// Go client would.
type wireCodec struct{}

func (wireCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (wireCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }
func (wireCodec) Name() string                    { return "proto" }
