package xds

import (
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

// nameGatedGen is worldGen whose first generation of one name reads the
// world, then waits on gate before it returns what it read: a slow
// generation that a change can overtake.
type nameGatedGen struct {
	worldGen
	name    string
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
	opened  sync.Once
	calls   atomic.Int32 // generations of name
}

func (g *nameGatedGen) release() { g.opened.Do(func() { close(g.gate) }) }

func (g *nameGatedGen) Generate(c *translate.Client, name string) translate.Result {
	r := g.worldGen.Generate(c, name)
	if name == g.name {
		g.calls.Add(1)
		g.once.Do(func() {
			close(g.entered)
			<-g.gate
		})
	}
	return r
}

func gatedServer(t *testing.T, w *world, name string) (*Server, *nameGatedGen) {
	t.Helper()
	g := &nameGatedGen{worldGen: worldGen{typ: 2, w: w}, name: name, entered: make(chan struct{}), gate: make(chan struct{})}
	all := make([]translate.Generator, len(modelTypes))
	for i := range all {
		all[i] = &worldGen{typ: i, w: w}
	}
	all[2] = g
	// A failing test must not leave a generation waiting.
	t.Cleanup(g.release)
	return newServer(Options{Discovery: model.NewStore(), Logger: discardLogger()}, all), g
}

// generatingA opens a stream on s and has it ask for "a", whose
// generation g holds: it returns once that generation is under way;
// done closes when the request returns.
func generatingA(t *testing.T, s *Server, g *nameGatedGen, node string) (m *memStream, done <-chan struct{}) {
	t.Helper()
	m = openMemStream(t, s)
	t.Cleanup(m.close)
	t.Cleanup(g.release) // runs first: a held generation must not outlive the test
	requested := make(chan struct{})
	go func() {
		defer close(requested)
		m.request(t, clusterRequest(node, "a"))
	}()
	<-g.entered
	return m, requested
}

func clusterRequest(node string, names ...string) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, Node: grpcNode(node, "ns"), ResourceNames: names}
}

func contents(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		var v wrapperspb.StringValue
		if err := proto.Unmarshal(a.GetValue(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Value)
	}
	return out
}

func nextSent(t *testing.T, m *memStream, what string) *discovery.DiscoveryResponse {
	t.Helper()
	select {
	case r := <-m.sent:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: nothing sent", what)
		return nil
	}
}

// TestWatchGeneratesOutsideTheServersLock: while one stream's request
// generates what the cache lacks, other streams are answered and pushes
// applied: the server's lock, which serialises them, is not held for
// generation, so that clients converging on a large mesh use every core.
func TestWatchGeneratesOutsideTheServersLock(t *testing.T) {
	w := newWorld()
	w.gen[2]["a"], w.gen[2]["b"] = 1, 1
	s, g := gatedServer(t, w, "a")
	slow, done := generatingA(t, s, g, "slow")
	fast := openMemStream(t, s)
	defer fast.close()

	answered := make(chan struct{})
	go func() {
		defer close(answered)
		fast.request(t, clusterRequest("fast", "b"))
		s.Push(push.Request{Configs: map[model.ConfigKey]struct{}{worldKey(2, "b"): {}}, Start: time.Now()})
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("another stream's request and a push waited for one stream's generation")
	}
	if got := contents(t, nextSent(t, fast, "fast")); len(got) != 1 || got[0] != "b@1" {
		t.Fatalf("fast got %v", got)
	}
	g.release()
	<-done
	if got := contents(t, nextSent(t, slow, "slow")); len(got) != 1 || got[0] != "a@1" {
		t.Fatalf("slow got %v", got)
	}
}

// TestPushDuringAWatchsGeneration: a change pushed while a request's
// resources are generated outside the lock, from the model before the
// change, is not lost: the stale generation is discarded and the client
// is answered from the changed model. (Its watch was not filed yet, so
// the push could not wake it: answered with the generation, it would
// hold the old resource until some later change.)
func TestPushDuringAWatchsGeneration(t *testing.T) {
	w := newWorld()
	w.gen[2]["a"] = 1
	s, g := gatedServer(t, w, "a")
	m, done := generatingA(t, s, g, "c") // a@1 read
	w.mu.Lock()
	w.gen[2]["a"] = 2
	w.mu.Unlock()
	s.Push(push.Request{Configs: map[model.ConfigKey]struct{}{worldKey(2, "a"): {}}, Start: time.Now()})
	g.release()
	<-done
	if got := contents(t, nextSent(t, m, "the client")); len(got) != 1 || got[0] != "a@2" {
		t.Fatalf("the client got %v after the change, want a@2", got)
	}
}

// TestClientsArrivingTogetherShareAGeneration: while one client's request
// generates a resource outside the lock, another client's request for
// the same resource waits for that generation rather than making its
// own: clients that arrive together (a rollout, a restart) ask for the
// same resources, and each would otherwise generate every one of them.
func TestClientsArrivingTogetherShareAGeneration(t *testing.T) {
	w := newWorld()
	w.gen[2]["a"] = 1
	s, g := gatedServer(t, w, "a")
	first, done := generatingA(t, s, g, "first")
	second := openMemStream(t, s)
	defer second.close()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		second.request(t, clusterRequest("second", "a"))
	}()
	select {
	case <-waited:
		t.Fatal("the second request was answered while the first generated what it asks for")
	case <-time.After(100 * time.Millisecond):
	}
	g.release()
	<-done
	<-waited
	for _, m := range []*memStream{first, second} {
		if got := contents(t, nextSent(t, m, "a client")); len(got) != 1 || got[0] != "a@1" {
			t.Fatalf("got %v, want a@1", got)
		}
	}
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("a was generated %d times for two clients arriving together, want once", n)
	}
}
