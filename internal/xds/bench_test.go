package xds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// benchModel: services x endpoints each, in namespace "default".
func benchModel(services, eps int) *model.Store {
	st := model.NewStore()
	for i := range services {
		var list []*model.Endpoint
		for j := range eps {
			list = append(list, &model.Endpoint{
				Address: fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j%250), Port: 8080, ServicePortName: "grpc",
				Locality: model.Locality{Region: "r", Zone: fmt.Sprintf("z%d", j%3)},
			})
		}
		st.Update(service(fmt.Sprintf("svc-%d", i), "default", 8080), list)
	}
	return st
}

// BenchmarkPushEndpointChange: one endpoint of one service changes; 1000
// clients are subscribed to it (and each to 4 other services). A push
// regenerates and marshals the ClusterLoadAssignment once and hands it to
// every client; each op includes every client's re-subscription (ACK).
func BenchmarkPushEndpointChange(b *testing.B) {
	const clients = 1000
	st := benchModel(200, 5)
	s := NewServer(Options{Discovery: st})
	hot := model.Hostname("svc-0.default.svc.cluster.local")
	cs := make([]*memStream, clients)
	subscribed := make([][]string, clients)
	for i := range cs {
		names := []string{model.ClusterName(8080, "", hot)}
		for k := 1; k < 5; k++ {
			names = append(names, model.ClusterName(8080, "", model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", (i*4+k)%200))))
		}
		c := openMemStream(b, s)
		defer c.close()
		c.request(b, &discovery.DiscoveryRequest{Node: grpcNode(fmt.Sprint("c", i), "default"), TypeUrl: resource.EndpointType, ResourceNames: names})
		c.ack(b, <-c.sent, names)
		cs[i], subscribed[i] = c, names
	}
	svc := st.GetService(hot)
	eps := st.Endpoints(hot, 8080, nil)
	b.ReportAllocs()
	b.ResetTimer()
	var pushTime time.Duration
	for i := range b.N {
		req := moveFirstEndpoint(st, svc, eps, i)
		start := time.Now()
		s.Push(req)
		pushTime += time.Since(start)
		for i, c := range cs {
			out := <-c.sent
			if len(out.GetResources()) != 1 {
				b.Fatalf("got %d resources", len(out.GetResources()))
			}
			c.ack(b, out, subscribed[i])
		}
	}
	b.ReportMetric(float64(pushTime.Nanoseconds())/float64(b.N), "push-ns/op")
}

// moveFirstEndpoint changes the port of svc's first endpoint, one of two
// by the round i, and returns the push request of that change.
func moveFirstEndpoint(st *model.Store, svc *model.Service, eps []*model.Endpoint, i int) push.Request {
	changed := append([]*model.Endpoint(nil), eps...)
	ep := *changed[0]
	ep.Port = uint32(9000 + i%2)
	changed[0] = &ep
	st.Update(svc, changed)
	var req push.Request
	req.Add(model.Event{Kind: model.EndpointsChanged, Hostname: svc.Hostname}, timeNow())
	return req
}

// BenchmarkGenerate: one generation and marshalling of each type, as a
// cache miss costs.
func BenchmarkGenerate(b *testing.B) {
	st := benchModel(10, 100)
	name := model.ClusterName(8080, "", "svc-1.default.svc.cluster.local")
	client := &translate.Client{Namespace: "default", GRPC: true}
	names := map[string]string{resource.ListenerType: "svc-1:8080", resource.RouteType: name, resource.ClusterType: name, resource.EndpointType: name}
	for _, g := range translate.Generators(translate.GeneratorOptions{Discovery: st}) {
		typ := g.Type()
		b.Run(typ.Short+"+marshal", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				r := g.Generate(client, names[typ.URL])
				if r.Resource == nil {
					b.Fatal("nothing generated")
				}
				if _, err := newEntry(typ.URL, names[typ.URL], r.Resource, r.Deps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEndToEnd measures, over loopback gRPC, the time from a model
// write of one service's endpoints to each of 100 ADS clients holding the
// new endpoint (200 services x 5 endpoints; every client subscribed to the
// changed service and 4 others; 100 ms debounce). Writes are spaced by
// more than the quiet period, as isolated changes; the spacing is outside
// the timer, so ns/op is the time until the last client has the change.
// Reported: p50 and p99 of the per-client delays.
func BenchmarkEndToEnd(b *testing.B) {
	for _, leading := range []bool{true, false} {
		b.Run(map[bool]string{true: "leading-edge", false: "trailing-only"}[leading], func(b *testing.B) {
			benchEndToEnd(b, leading)
		})
	}
}

func benchEndToEnd(b *testing.B, leading bool) {
	const clients = 100
	const after = 100 * time.Millisecond
	st := benchModel(200, 5)
	s := NewServer(Options{Discovery: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := push.NewDebouncer(push.Options{DebounceAfter: after, DebounceMax: time.Second, LeadingEdge: leading}, s.Push)
	st.AppendEventHandler(d.Handle)
	go d.Run(ctx)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()

	hot := model.Hostname("svc-0.default.svc.cluster.local")
	hotName := model.ClusterName(8080, "", hot)
	type seen struct {
		client int
		addr   string
		at     time.Time
	}
	seenCh := make(chan seen, clients*4)
	ready := make(chan struct{}, clients)
	for i := range clients {
		names := []string{hotName}
		for k := 1; k < 5; k++ {
			names = append(names, model.ClusterName(8080, "", model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", 1+(i*4+k)%199))))
		}
		// Each client reads its own stream and holds nothing: what it is
		// sent is checked as it comes.
		c, err := xdstest.Open(ctx, dial(b, lis.Addr().String()), xdstest.Options{Node: grpcNode(fmt.Sprint("c", i), "default"), Paused: true, Forget: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Subscribe(resource.EndpointType, names...); err != nil {
			b.Fatal(err)
		}
		go func() {
			first := true
			var r xdstest.Response
			for c.ReceiveInto(&r) == nil {
				for _, l := range r.LoadAssignment(hotName).GetEndpoints() {
					for _, e := range l.GetLbEndpoints() {
						if addr := e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress(); strings.HasPrefix(addr, "192.0.2.") {
							seenCh <- seen{i, addr, r.Received}
						}
					}
				}
				if first {
					first = false
					ready <- struct{}{}
				}
				_ = c.ACK(&r)
				r.Reset()
			}
		}()
	}
	for range clients {
		<-ready
	}
	svc := st.GetService(hot)
	base := st.Endpoints(hot, 8080, nil)
	var delays []time.Duration
	b.ResetTimer()
	for n := range b.N {
		// An isolated change comes after a quiet spell; the spell is not
		// part of what is measured.
		b.StopTimer()
		time.Sleep(after + 20*time.Millisecond)
		b.StartTimer()
		addr := fmt.Sprintf("192.0.2.%d", n%250)
		eps := append(append([]*model.Endpoint(nil), base...), &model.Endpoint{Address: addr, Port: 8080, ServicePortName: "grpc"})
		start := time.Now()
		st.Update(svc, eps)
		got := map[int]bool{}
		timeout := time.After(wait)
		for len(got) < clients {
			select {
			case sn := <-seenCh:
				if sn.addr == addr && !got[sn.client] {
					got[sn.client] = true
					delays = append(delays, sn.at.Sub(start))
				}
			case <-timeout:
				b.Fatalf("only %d clients got the endpoint", len(got))
			}
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
}
