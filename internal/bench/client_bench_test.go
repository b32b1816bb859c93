package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// scriptedConn is a connection whose streams return a script of
// responses, each decoded from its wire form as gRPC would, and swallow
// every request: a client's own work per response, without a server.
type scriptedConn struct{ script [][]byte }

func (*scriptedConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errors.New("scriptedConn: unary calls are not scripted")
}

func (c *scriptedConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return &scriptedStream{ctx: ctx, script: c.script}, nil
}

type scriptedStream struct {
	ctx    context.Context
	script [][]byte
}

func (*scriptedStream) Header() (metadata.MD, error) { return nil, nil }
func (*scriptedStream) Trailer() metadata.MD         { return nil }
func (*scriptedStream) CloseSend() error             { return nil }
func (s *scriptedStream) Context() context.Context   { return s.ctx }
func (*scriptedStream) SendMsg(any) error            { return nil }
func (s *scriptedStream) RecvMsg(m any) error {
	if len(s.script) == 0 {
		return io.EOF
	}
	b := s.script[0]
	s.script = s.script[1:]
	return proto.Unmarshal(b, m.(proto.Message))
}

func mustMarshal(b testing.TB, m proto.Message) []byte {
	out, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func response(b testing.TB, typeURL string, version int, ms ...proto.Message) []byte {
	r := &discovery.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: fmt.Sprint(version), Nonce: fmt.Sprint(version)}
	for _, m := range ms {
		a, err := anypb.New(m)
		if err != nil {
			b.Fatal(err)
		}
		r.Resources = append(r.Resources, a)
	}
	return mustMarshal(b, r)
}

// cla is a ClusterLoadAssignment of 5 endpoints: 4 always the same, the
// fifth numbered by change.
func cla(name string, change int) *endpoint.ClusterLoadAssignment {
	var lbs []*endpoint.LbEndpoint
	for _, addr := range []string{"10.128.0.1", "10.128.0.2", "10.128.0.3", "10.128.0.4", fmt.Sprintf("10.129.%d.%d", change/250, change%250)} {
		lbs = append(lbs, &endpoint.LbEndpoint{
			HealthStatus: core.HealthStatus_HEALTHY,
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{
				Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address: addr, PortSpecifier: &core.SocketAddress_PortValue{PortValue: 7070}}},
			}}},
		})
	}
	return &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{{
		Locality: &core.Locality{Region: "r", Zone: "z"}, LbEndpoints: lbs}}}
}

// clientScript is what a client of meshbench's default workload gets:
// listeners, route configurations, clusters and ClusterLoadAssignments of
// its services (5 endpoints each), then one response per change, of one
// ClusterLoadAssignment whose fifth endpoint is new.
func clientScript(b testing.TB, services, changes int) (listeners []string, script [][]byte) {
	var ls, rcs, cs, clas []proto.Message
	var names []string
	for i := range services {
		host := fmt.Sprintf("svc-%d.bench-0.svc.cluster.local", i)
		name := "outbound|7070||" + host
		names = append(names, name)
		listeners = append(listeners, host+":7070")
		m, err := anypb.New(&hcm.HttpConnectionManager{RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{RouteConfigName: name}}})
		if err != nil {
			b.Fatal(err)
		}
		ls = append(ls, &listener.Listener{Name: host + ":7070", ApiListener: &listener.ApiListener{ApiListener: m}})
		rcs = append(rcs, &route.RouteConfiguration{Name: name, VirtualHosts: []*route.VirtualHost{{Name: host, Domains: []string{host}, Routes: []*route.Route{{
			Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: name}}},
		}}}}})
		cs = append(cs, &cluster.Cluster{Name: name, ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{EdsConfig: &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}}})
		clas = append(clas, cla(name, 0))
	}
	script = [][]byte{
		response(b, resourcev3.ListenerType, 1, ls...),
		response(b, resourcev3.RouteType, 2, rcs...),
		response(b, resourcev3.ClusterType, 3, cs...),
		response(b, resourcev3.EndpointType, 4, clas...),
	}
	for i := range changes {
		script = append(script, response(b, resourcev3.EndpointType, 5+i, cla(names[i%services], 1+i)))
	}
	return listeners, script
}

type countingObserver struct{ observed, convergedCount int }

func (o *countingObserver) observe(int, string, time.Time) { o.observed++ }
func (o *countingObserver) converged(int, time.Time)       { o.convergedCount++ }

// BenchmarkClientResponse: a simulated client's work per EDS response of a
// change, from the wire bytes to its ACK (decoding, the addresses it
// newly holds, the request).
func BenchmarkClientResponse(b *testing.B) {
	listeners, script := clientScript(b, 5, b.N)
	obs := &countingObserver{}
	c := newADSClient(0, "bench-0", listeners, obs, &clientStats{})
	b.ReportAllocs()
	b.ResetTimer()
	err := c.run(context.Background(), &scriptedConn{script: script})
	b.StopTimer()
	if err == nil || !strings.Contains(err.Error(), "closed the stream") {
		b.Fatalf("run: %v", err)
	}
	if obs.convergedCount != 1 || obs.observed != 25+b.N {
		b.Fatalf("converged %d times, observed %d addresses; want 1 and %d", obs.convergedCount, obs.observed, 25+b.N)
	}
}

// BenchmarkClientMemory: the heap a converged simulated client keeps (5
// services), what 10 000 clients multiply.
func BenchmarkClientMemory(b *testing.B) {
	listeners, script := clientScript(b, 5, 0)
	clients := make([]*adsClient, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range clients {
		clients[i] = newADSClient(i, "bench-0", listeners, &countingObserver{}, &clientStats{})
		_ = clients[i].run(context.Background(), &scriptedConn{script: script})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "live-B/client")
	runtime.KeepAlive(clients)
}
