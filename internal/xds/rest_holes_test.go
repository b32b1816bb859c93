package xds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// blockingGen is worldGen whose generations wait on gate while blocking
// is set, as a large mesh's generation takes time.
type blockingGen struct {
	worldGen
	blocking atomic.Bool
	entered  chan struct{}
	gate     chan struct{}
}

func (g *blockingGen) Generate(c *translate.Client, name string) translate.Result {
	if g.blocking.Load() {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.worldGen.Generate(c, name)
}

func worldServer(w *world, gens ...translate.Generator) *Server {
	all := make([]translate.Generator, len(modelTypes))
	for i := range all {
		all[i] = &worldGen{typ: i, w: w}
	}
	for _, g := range gens {
		all[g.(*blockingGen).typ] = g
	}
	return newServer(Options{Discovery: model.NewStore(), Logger: discardLogger()}, all)
}

// TestRESTBuildsOutsideTheServersLock: a REST request generating what the
// cache lacks does not hold the lock pushes and streams' watches take,
// so that a flood of REST requests cannot hold up pushes.
func TestRESTBuildsOutsideTheServersLock(t *testing.T) {
	w := newWorld()
	for _, n := range modelNames {
		w.gen[2][n] = 1
	}
	g := &blockingGen{worldGen: worldGen{typ: 2, w: w}, entered: make(chan struct{}), gate: make(chan struct{})}
	s := worldServer(w, g)
	g.blocking.Store(true)
	answered := make(chan error, 1)
	go func() {
		_, err := s.fetch(context.Background(), &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, Node: envoyNode("rest")})
		answered <- err
	}()
	<-g.entered // the request generates its first cluster
	pushed := make(chan struct{})
	go func() {
		s.Push(push.Request{Configs: map[model.ConfigKey]struct{}{worldKey(2, "a"): {}}, Start: time.Now()})
		close(pushed)
	}()
	select {
	case <-pushed:
	case <-time.After(5 * time.Second):
		t.Fatal("a push waited for a REST request's generation: REST builds under the server's lock")
	}
	g.blocking.Store(false)
	close(g.gate)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// TestRESTRacesPushesAndStreams: REST requests built outside the lock,
// concurrent with pushes that change the model and with streams
// generating the same resources into the cache (run with -race), answer
// resources that unmarshal and, once the pushes stop, the model's last
// state: never a cached resource a push made stale.
func TestRESTRacesPushesAndStreams(t *testing.T) {
	w := newWorld()
	for _, n := range modelNames {
		w.gen[2][n] = 0
	}
	s := worldServer(w)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var fetches atomic.Int64
	for i := range 4 {
		wg.Go(func() {
			node := envoyNode(fmt.Sprint("rest-", i))
			for ctx.Err() == nil {
				out, err := s.fetch(ctx, &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, Node: node})
				if err != nil {
					t.Error(err)
					return
				}
				fetches.Add(1)
				for _, a := range out.Resources {
					var v wrapperspb.StringValue
					if err := proto.Unmarshal(a.Value, &v); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	// Streams fill and use the cache the REST requests read.
	for i := range 2 {
		wg.Go(func() {
			node := envoyNode(fmt.Sprint("stream-", i))
			for ctx.Err() == nil {
				c := s.client(node)
				s.mu.Lock()
				for _, n := range modelNames {
					s.resource(2, &c, n, nil)
				}
				s.mu.Unlock()
			}
		})
	}
	for seq := 1; seq <= 300; seq++ {
		w.mu.Lock()
		n := modelNames[seq%len(modelNames)]
		w.gen[2][n] = seq
		w.mu.Unlock()
		s.Push(push.Request{Configs: map[model.ConfigKey]struct{}{worldKey(2, n): {}}, Start: time.Now()})
	}
	for deadline := time.Now().Add(modelBound); fetches.Load() < 20 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	out, err := s.fetch(context.Background(), &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, Node: envoyNode("after")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range out.Resources {
		var v wrapperspb.StringValue
		if err := proto.Unmarshal(a.Value, &v); err != nil {
			t.Fatal(err)
		}
		got[v.Value] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range modelNames {
		if want := content(n, w.gen[2][n]); !got[want] {
			t.Errorf("after the pushes REST answered %v, without %s", got, want)
		}
	}
}

// TestRESTRacesRealGenerators: meshpilot's own generators, called by
// REST requests of every type outside the server's lock while an Envoy
// stream's watches and the pushes of a changing model call them under
// it (run with -race: the generators must be safe for concurrent use).
func TestRESTRacesRealGenerators(t *testing.T) {
	ts := startServer(t, baseStore())
	c := openADS(t, dial(t, ts.addr), envoyNode("stream"))
	c.Subscribe(resource.ClusterType)
	c.ACK(c.Next())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, typ := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType} {
		wg.Go(func() {
			node := envoyNode(fmt.Sprint("rest-", i))
			names := []string{model.ClusterName(9080, "", "reviews.default.svc.cluster.local"), "reviews.default.svc.cluster.local:9080"}
			for ctx.Err() == nil {
				if _, err := ts.fetch(ctx, &discovery.DiscoveryRequest{TypeUrl: typ, Node: node, ResourceNames: names}); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
				if _, err := ts.fetch(ctx, &discovery.DiscoveryRequest{TypeUrl: typ, Node: node}); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 100 {
		ts.store.Update(service(fmt.Sprint("svc-", i%7), "default", 8080), endpoints(8080, model.Healthy, fmt.Sprint("10.2.0.", i%250+1)))
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
}
