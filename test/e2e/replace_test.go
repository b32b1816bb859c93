package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/kube"
	"github.com/meshpilot/meshpilot/internal/server"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestReplaceIsNotADeletion: a Service or EndpointSlice deleted and
// created again within one debounce window (kubectl replace --force, a
// Helm upgrade) never reaches clients as a deletion: grpc-go fails every
// RPC to a listener or cluster that is gone, or to a cluster without
// endpoints. Every RPC made meanwhile succeeds. A deletion that is not
// followed by a create still reaches the client.
func TestReplaceIsNotADeletion(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.51", "127.0.0.52")
	createService(t, ns, "replaced", 7070)
	writeSlice(t, ns, "replaced", bs)
	// A replace is two writes (three or four with the slice), each a round
	// trip to the API server followed by the watch, the work queue and the
	// rebuild: on a busy machine the chain outlasted a window of 1s. So the
	// debouncer's clock stands still from the first write until meshpilot
	// has seen the last one through (heldClock): the replace falls within
	// one window however long it takes. A debouncer that pushed the
	// removal at once would still fail the test: the leading edge is open
	// when the replace begins.
	const window = time.Second
	clock := &heldClock{}
	probe := newRegistryProbe()
	reg, err := kube.New(env.API, kube.Options{Namespaces: []string{ns}, Logger: slog.New(slog.DiscardHandler),
		QueueMetrics: probe, OnInformerEvent: probe.informerEvent})
	if err != nil {
		t.Fatal(err)
	}
	host := model.ServiceHostname("replaced", ns, model.DefaultDomainSuffix)
	srv := startObserved(t, ns, server.Options{
		Sources:  []aggregate.Source{{Name: "kubernetes", Controller: reg}},
		Debounce: push.Options{LeadingEdge: true, DebounceAfter: window, DebounceMax: 3 * window, Clock: clock},
	})
	cc := grpctest.Channel(t, srv.XDSAddr(), "xds:///replaced:7070",
		grpctest.ChannelOptions{Namespace: ns, MapAddress: grpctest.DocToLoopback})
	grpctest.AwaitSpread(t, cc, bs...)

	services := env.Client.CoreV1().Services(ns)
	endpointSlices := env.Client.DiscoveryV1().EndpointSlices(ns)
	deleteService := func(t *testing.T) {
		t.Helper()
		if err := services.Delete(ctx(t), "replaced", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deleteSlice := func(t *testing.T) {
		t.Helper()
		if err := endpointSlices.Delete(ctx(t), "replaced-slice", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// replaced runs a replace of writes writes while RPCs flow, then waits
	// until the client has a later change (so every push the replace
	// caused has reached it) and checks that no RPC failed.
	replaced := func(t *testing.T, writes int64, replace func(t *testing.T)) {
		t.Helper()
		// Let the window of the previous push pass, so that the delete
		// opens a new one: with the leading edge open, a deletion used to
		// be pushed at once.
		time.Sleep(window)
		rpcs := startRPCs(cc)
		clock.hold()
		from := probe.informerEvents()
		replace(t)
		// Meshpilot has seen the replace through once its informers have
		// handed over every write, its work queue is idle and its model
		// holds the service with both endpoints: every rebuild from then
		// on reads the replaced objects, and what was pushed or is due
		// reads the model as it is.
		testenv.Eventually(t, "the replace seen through", func() (bool, string) {
			n, pending := probe.informerEvents()-from, probe.Pending()
			eps := reg.Endpoints(host, 7070, nil)
			return n >= writes && pending == 0 && reg.GetService(host) != nil && len(eps) == 2,
				fmt.Sprintf("%d of %d writes handed over, %d keys queued or in work, %d endpoints", n, writes, pending, len(eps))
		})
		clock.release()
		writeSlice(t, ns, "replaced", bs, bs[1])
		grpctest.AwaitSpread(t, cc, bs[0])
		rpcs.checkAllSucceeded(t)
		writeSlice(t, ns, "replaced", bs)
		grpctest.AwaitSpread(t, cc, bs...)
	}

	t.Run("the Service replaced with its EndpointSlice", func(t *testing.T) {
		// As in a cluster: the garbage collector deletes the slice of a
		// deleted Service, and the EndpointSlice controller writes a new
		// one after the Service is created again.
		replaced(t, 4, func(t *testing.T) {
			deleteService(t)
			deleteSlice(t)
			createService(t, ns, "replaced", 7070)
			writeSlice(t, ns, "replaced", bs)
		})
	})
	t.Run("the Service alone replaced", func(t *testing.T) {
		replaced(t, 2, func(t *testing.T) {
			deleteService(t)
			createService(t, ns, "replaced", 7070)
		})
	})
	t.Run("the EndpointSlice replaced", func(t *testing.T) {
		replaced(t, 2, func(t *testing.T) {
			deleteSlice(t)
			writeSlice(t, ns, "replaced", bs)
		})
	})
	t.Run("a deleted EndpointSlice still reaches the client", func(t *testing.T) {
		deleteSlice(t)
		grpctest.AwaitUnavailable(t, cc)
		writeSlice(t, ns, "replaced", bs)
		grpctest.AwaitSpread(t, cc, bs...)
	})
	t.Run("a deleted Service still reaches the client", func(t *testing.T) {
		deleteService(t)
		grpctest.AwaitUnavailable(t, cc)
	})
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("clients sent %d NACKs", n)
	}
}

// rpcLoop makes RPCs one after another until checked. Its counts are
// written by its goroutine and read once it is done.
type rpcLoop struct {
	stop, done chan struct{}
	ok, failed int
	firstErr   error
}

func startRPCs(cc *grpc.ClientConn) *rpcLoop {
	l := &rpcLoop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			if _, err := grpctest.Call(context.Background(), cc); err == nil {
				l.ok++
			} else if l.failed++; l.firstErr == nil {
				l.firstErr = err
			}
			time.Sleep(2 * time.Millisecond) // pace the RPCs: a few hundred a second is plenty
		}
	}()
	return l
}

// checkAllSucceeded stops the loop; every RPC must have succeeded.
func (l *rpcLoop) checkAllSucceeded(t *testing.T) {
	t.Helper()
	close(l.stop)
	<-l.done
	if l.failed > 0 || l.ok == 0 {
		t.Fatalf("%d of %d RPCs failed; the first: %v", l.failed, l.ok+l.failed, l.firstErr)
	}
	t.Logf("all %d RPCs succeeded", l.ok)
}

// heldClock is the debouncer's clock in TestReplaceIsNotADeletion: the
// system's, except that it stands still while held, so that no debounce
// deadline passes then. Its timers are the system's: one that fires while
// the clock stands still finds nothing due, and the debouncer arms it
// again; once released, the clock jumps to the system's time and what is
// due goes out.
type heldClock struct {
	mu sync.Mutex // guards at
	at time.Time  // the time it stands at while held; zero otherwise
}

func (c *heldClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() {
		return c.at
	}
	return time.Now()
}

func (c *heldClock) hold() {
	c.mu.Lock()
	c.at = time.Now()
	c.mu.Unlock()
}

func (c *heldClock) release() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

func (c *heldClock) NewTimer() push.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return systemTimer{t}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time   { return t.t.C }
func (t systemTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t systemTimer) Stop()                 { t.t.Stop() }

// registryProbe follows the kube registry of TestReplaceIsNotADeletion:
// it counts the Service and EndpointSlice events its informers handed
// over (kube.Options.OnInformerEvent), and, as its work queue's metrics
// provider, the keys queued and not yet done (testenv.QueueProbe).
type registryProbe struct {
	testenv.QueueProbe
	informer atomic.Int64
}

func newRegistryProbe() *registryProbe { return &registryProbe{} }

func (p *registryProbe) informerEvent(kind, _ string) {
	if kind == kube.KindService || kind == kube.KindEndpointSlice {
		p.informer.Add(1)
	}
}

func (p *registryProbe) informerEvents() int64 { return p.informer.Load() }
