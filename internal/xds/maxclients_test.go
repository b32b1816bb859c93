package xds

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestMaxClients: beyond the cap a new stream, state of the world or
// delta, is refused at once with ResourceExhausted while the streams
// already open go on being served; a stream that closes frees its slot;
// refusals are counted and logged once per interval, not once each.
func TestMaxClients(t *testing.T) {
	st := baseStore()
	ts := startServer(t, st, func(o *Options) { o.MaxClients = 2 })
	// One line for the whole test, however slow the machine.
	ts.refused.every = time.Hour
	cc := dial(t, ts.addr)

	served := []*xdstest.TestClient{
		openADS(t, cc, grpcNode("a", "default")),
		openDelta(t, cc, envoyNode("b")),
	}
	for _, c := range served {
		c.Subscribe(resource.EndpointType, reviews)
		c.ACK(c.Next())
	}

	refused := uint64(0)
	expectRefused := func(c *xdstest.TestClient) {
		t.Helper()
		// The request may find the stream already ended.
		_ = c.Client.Subscribe(resource.EndpointType, reviews)
		err := c.ExpectEnd(wait)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "maximum of 2 ") || !strings.Contains(msg, "another replica") {
			t.Fatalf("message %q names neither the cap nor another replica", msg)
		}
		refused++
	}
	expectRefused(openADS(t, cc, grpcNode("c", "default")))
	expectRefused(openDelta(t, cc, envoyNode("d")))

	// The two admitted streams are still served.
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"))
	for _, c := range served {
		if got := claAddrs(t, c.Next()); !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.3"}) {
			t.Fatalf("%s: pushed %v, want the new endpoints", c.Node().GetId(), got)
		}
	}
	if g, e := ts.ClientCounts(); g+e != 2 {
		t.Fatalf("%d gRPC and %d Envoy streams counted, want 2 in all", g, e)
	}

	// Once a stream closes, a new one is admitted (the server sees the
	// close a little later: retry as a client would).
	served[0].Close()
	next := admitWithin(t, cc, xdstest.Options{Node: envoyNode("e"), Delta: true}, &refused)
	// and the cap holds again.
	expectRefused(openDelta(t, cc, envoyNode("f")))
	next.Close()

	if got := ts.RefusedStreams(); got.MaxClients != refused || got.NotReady != 0 {
		t.Fatalf("refused streams %+v, want %d beyond the cap and none not ready", got, refused)
	}
	if n := strings.Count(ts.logs.String(), "refusing new streams beyond --max-clients"); n != 1 {
		t.Fatalf("%d refusal lines logged for %d refusals, want 1:\n%s", n, refused, ts.logs.String())
	}
}

// admitWithin opens streams with o until one is served, counting the
// refused ones, and fails the test after wait. The stream it returns
// stays open until closed.
func admitWithin(t *testing.T, cc grpc.ClientConnInterface, o xdstest.Options, refused *uint64) *xdstest.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		c, err := xdstest.Open(context.Background(), cc, o)
		if err != nil {
			t.Fatalf("no stream admitted within %v: %v", wait, err)
		}
		_ = c.Subscribe(resource.EndpointType, reviews)
		_, err = c.Next(ctx)
		if err == nil {
			t.Cleanup(c.Close)
			return c
		}
		c.Close()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("no stream admitted within %v: %v", wait, err)
		}
		*refused++
	}
}
