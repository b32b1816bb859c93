package e2e

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/server"
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
	// rebuild; on a loaded 2-core machine one of them can take a few
	// hundred milliseconds. A window of 1s keeps them in one window every
	// time; DebounceMax above it lets the removals of a replace with its
	// slice hold the push for the whole chain.
	const window = time.Second
	srv := startObserved(t, ns, server.Options{Debounce: push.Options{
		LeadingEdge: true, DebounceAfter: window, DebounceMax: 3 * window,
	}})
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
	// replaced runs a replace while RPCs flow, then waits until the client
	// has a later change (so every push the replace caused has reached it)
	// and checks that no RPC failed.
	replaced := func(t *testing.T, replace func(t *testing.T)) {
		t.Helper()
		// Let the window of the previous push pass, so that the delete
		// opens a new one: with the leading edge open, a deletion used to
		// be pushed at once.
		time.Sleep(window)
		rpcs := startRPCs(cc)
		replace(t)
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
		replaced(t, func(t *testing.T) {
			deleteService(t)
			deleteSlice(t)
			createService(t, ns, "replaced", 7070)
			writeSlice(t, ns, "replaced", bs)
		})
	})
	t.Run("the Service alone replaced", func(t *testing.T) {
		replaced(t, func(t *testing.T) {
			deleteService(t)
			createService(t, ns, "replaced", 7070)
		})
	})
	t.Run("the EndpointSlice replaced", func(t *testing.T) {
		replaced(t, func(t *testing.T) {
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
