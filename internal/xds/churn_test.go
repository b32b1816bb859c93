package xds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// churnStreams opens n streams, spread over a few connections, in
// parallel: each subscribes and either reads its first response and
// closes, or closes at once (a client gone before its answer was
// sent), alternately state of the world and delta, gRPC and Envoy
// nodes. Every fourth batch of streams ends by closing its connection
// rather than each stream.
func churnStreams(t *testing.T, addr string, n int) (answered int64) {
	t.Helper()
	var got atomic.Int64
	const perConn, workers = 500, 8
	for batch := 0; batch*perConn < n; batch++ {
		cc := dial(t, addr)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		next := make(chan int)
		for range workers {
			wg.Go(func() {
				for i := range next {
					if err := churnOne(cc, i, batch%4 != 3, &got); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for i := batch * perConn; i < min(n, (batch+1)*perConn); i++ {
			select {
			case next <- i:
			case err := <-errs:
				t.Fatal(err)
			}
		}
		close(next)
		wg.Wait()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		_ = cc.Close()
	}
	return got.Load()
}

func churnOne(cc *grpc.ClientConn, i int, closeStream bool, answered *atomic.Int64) error {
	node := envoyNode(fmt.Sprint("churn-", i%50))
	if i%3 == 0 {
		node = grpcNode(fmt.Sprint("churn-", i%50), "default")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := xdstest.Open(ctx, cc, xdstest.Options{Node: node, Delta: i%2 == 1, Forget: true})
	if err != nil {
		return err
	}
	if closeStream {
		defer c.Close()
	}
	if err := c.Subscribe(resource.EndpointType, reviews); err != nil {
		return err
	}
	if i%4 < 2 {
		return nil // gone before the answer
	}
	if _, err := c.Next(ctx); err != nil {
		return fmt.Errorf("stream %d: %w", i, err)
	}
	answered.Add(1)
	return nil
}

// TestStreamChurnLeavesNothing: 5000 streams that connect, subscribe
// and disconnect leave the server's goroutines, its client state and
// watches, and the heap as they were before them. Goroutines are
// compared one by one with those of the baseline (goleak), the heap
// with a tolerance well under what 5000 streams would leave if each
// kept a single response: both are polled until they settle.
func TestStreamChurnLeavesNothing(t *testing.T) {
	const streams = 5000
	ts := startServer(t, baseStore())
	// What the first streams start once and keep (pools, timers) is
	// part of the baseline.
	churnStreams(t, ts.addr, 100)
	settled := func() (bool, string) {
		g, e := ts.ClientCounts()
		st := ts.Stats()
		ts.shed.mu.Lock()
		conns, onConns := len(ts.shed.byAddr), len(ts.shed.byStream)
		ts.shed.mu.Unlock()
		filed := registrations(ts.Server)
		return g+e == 0 && st.Watches == 0 && filed == 0 && conns == 0 && onConns == 0,
			fmt.Sprintf("%d streams, %d watches, %d registrations, %d connections, %d streams on them", g+e, st.Watches, filed, conns, onConns)
	}
	testenv.Eventually(t, "the warm-up streams gone", settled)
	goroutines := goleak.IgnoreCurrent()
	heap := liveheap.AfterGC()

	if n := churnStreams(t, ts.addr, streams); n != streams/2 {
		t.Fatalf("%d streams answered, want %d", n, streams/2)
	}

	testenv.Eventually(t, "the churned streams gone", settled)
	testenv.Eventually(t, "goroutines back to the baseline", func() (bool, string) {
		err := goleak.Find(goroutines)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	// 5000 streams that each left one response (a few hundred bytes) or
	// a stream's state (a few KiB) behind would exceed it.
	const tolerance = 1 << 20
	var now uint64
	testenv.Eventually(t, "the heap back to the baseline", func() (bool, string) {
		now = liveheap.AfterGC()
		return now <= heap+tolerance, fmt.Sprintf("%d bytes live, %d before the streams", now, heap)
	})
	t.Logf("live heap %d bytes before %d streams, %d after", heap, streams, now)
}
