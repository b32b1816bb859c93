package xds

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// streamCostServerEnv makes TestStreamCost, run again in a process of
// its own, the bare xDS server it measures (serveStreamCost), so that
// what the clients hold does not count as the server's.
const streamCostServerEnv = "MESHPILOT_STREAM_COST_SERVER"

// serverCost is what the server process holds at one moment.
type serverCost struct {
	streams, goroutines int
	heap, stack         int64 // live heap after GC, goroutine stacks in use
}

// serveStreamCost serves xDS for TestStreamCost: it prints its address,
// then answers each line "measure" on stdin with its figures, until
// stdin closes.
func serveStreamCost(t *testing.T) {
	ts := startServer(t, baseStore())
	fmt.Printf("addr %s\n", ts.addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		heap := liveheap.AfterGC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		g, e := ts.ClientCounts()
		fmt.Printf("cost %d %d %d %d\n", g+e, runtime.NumGoroutine(), heap, m.StackInuse)
	}
}

// costServer is serveStreamCost run as a process of its own.
type costServer struct {
	addr string
	in   io.WriteCloser
	out  *bufio.Scanner
}

func startCostServer(t *testing.T) *costServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamCost$")
	cmd.Env = append(os.Environ(), streamCostServerEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the server process: %v\n%s", err, stderr.String())
		}
	})
	s := &costServer{in: in, out: bufio.NewScanner(out)}
	if _, err := fmt.Sscanf(s.line(t), "addr %s", &s.addr); err != nil {
		t.Fatalf("the server process did not say its address: %v\n%s", err, stderr.String())
	}
	return s
}

func (s *costServer) line(t *testing.T) string {
	t.Helper()
	for s.out.Scan() {
		// The test binary prints its own lines (PASS) too.
		if l := s.out.Text(); strings.HasPrefix(l, "addr ") || strings.HasPrefix(l, "cost ") {
			return l
		}
	}
	t.Fatalf("the server process ended: %v", s.out.Err())
	return ""
}

func (s *costServer) measure(t *testing.T) serverCost {
	t.Helper()
	if _, err := io.WriteString(s.in, "measure\n"); err != nil {
		t.Fatal(err)
	}
	var c serverCost
	if _, err := fmt.Sscanf(s.line(t), "cost %d %d %d %d", &c.streams, &c.goroutines, &c.heap, &c.stack); err != nil {
		t.Fatal(err)
	}
	return c
}

// settle measures once the server holds want streams and its goroutines
// have stopped moving (a stream's last goroutines end after it is
// counted closed).
func (s *costServer) settle(t *testing.T, want int) serverCost {
	t.Helper()
	var c serverCost
	prev := -1
	testenv.Eventually(t, fmt.Sprintf("%d streams open on the server", want), func() (bool, string) {
		c = s.measure(t)
		ok := c.streams == want && c.goroutines == prev
		prev = c.goroutines
		return ok, fmt.Sprintf("%d streams, %d goroutines", c.streams, c.goroutines)
	})
	return c
}

// openCostStreams opens n ADS streams on cc, state of the world and delta
// in turn, each answered once (every cluster), and leaves them open
// until ctx ends.
func openCostStreams(t *testing.T, ctx context.Context, cc *grpc.ClientConn, first, n int) {
	t.Helper()
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)
	for i := first; i < first+n; i++ {
		node := envoyNode(fmt.Sprint("cost-", i))
		var err error
		if i%2 == 0 {
			var st discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
			if st, err = ads.StreamAggregatedResources(ctx); err == nil {
				if err = st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err == nil {
					_, err = st.Recv()
				}
			}
		} else {
			var st discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
			if st, err = ads.DeltaAggregatedResources(ctx); err == nil {
				if err = st.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err == nil {
					_, err = st.Recv()
				}
			}
		}
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
}

// TestStreamCost: what an open, answered, idle stream and a client
// connection cost the server, measured in a server process of its own:
// goroutines, live heap after GC, and goroutine stacks. An idle stream
// runs one goroutine, grpc-go's handler, which receives: its sender
// runs only while it has responses to send, and the send timeout runs
// none while it waits.
func TestStreamCost(t *testing.T) {
	if os.Getenv(streamCostServerEnv) != "" {
		serveStreamCost(t)
		return
	}
	const (
		conns, perConn = 10, 100 // grpc-go clients open 100 streams per connection at most
		streams        = conns * perConn
		singles        = 100 // connections of one stream each
	)
	srv := startCostServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// What the first streams start once and keep (pools, buffers) is
	// part of the baseline.
	warm, warmCancel := context.WithCancel(ctx)
	openCostStreams(t, warm, dial(t, srv.addr), 0, 10)
	warmCancel()
	srv.settle(t, 0)

	// The connections first, each with one stream, so that the streams
	// added to them next are measured alone.
	ccs := make([]*grpc.ClientConn, conns)
	for c := range ccs {
		ccs[c] = dial(t, srv.addr)
		openCostStreams(t, ctx, ccs[c], c*perConn, 1)
	}
	opened := srv.settle(t, conns)
	for c, cc := range ccs {
		openCostStreams(t, ctx, cc, c*perConn+1, perConn-1)
	}
	many := srv.settle(t, streams)
	for c := range singles {
		openCostStreams(t, ctx, dial(t, srv.addr), streams+c, 1)
	}
	single := srv.settle(t, streams+singles)

	per := func(a, b int64, n int) float64 { return float64(b-a) / float64(n) }
	added := streams - conns
	goroutines := per(int64(opened.goroutines), int64(many.goroutines), added)
	heap := per(opened.heap, many.heap, added)
	stack := per(opened.stack, many.stack, added)
	// A connection with one stream, less that stream's cost.
	connGoroutines := per(int64(many.goroutines), int64(single.goroutines), singles) - goroutines
	connHeap := per(many.heap, single.heap, singles) - heap
	connStack := per(many.stack, single.stack, singles) - stack
	t.Logf("per stream (%d streams on %d connections): %.2f goroutines, %.0f B heap, %.0f B stacks", added, conns, goroutines, heap, stack)
	t.Logf("per connection besides its streams (%d connections): %.2f goroutines, %.0f B heap, %.0f B stacks", singles, connGoroutines, connHeap, connStack)

	// Exact counts: goroutines are settled, unlike the heap.
	if got, want := many.goroutines-opened.goroutines, added; got != want {
		t.Errorf("%d streams run %d goroutines, want %d (1 per stream)", added, got, want)
	}
}
