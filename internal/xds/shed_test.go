package xds

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestShed: a shed ADS stream, state of the world or delta, ends with
// Unavailable (the code grpc-go reconnects on) saying why, while the
// other streams go on being served; a shed stream stops counting once
// its handler has ended, and an id no longer open sheds nothing.
func TestShed(t *testing.T) {
	st := baseStore()
	ts := startServer(t, st)
	cc := dial(t, ts.addr)
	// Each client's stream is the one that appears once it is served:
	// clients open one after the other.
	var clients []*xdstest.TestClient
	var ids []int64
	for _, open := range []func() *xdstest.TestClient{
		func() *xdstest.TestClient { return openADS(t, cc, grpcNode("a", "default")) },
		func() *xdstest.TestClient { return openADS(t, cc, grpcNode("b", "default")) },
		func() *xdstest.TestClient { return openDelta(t, cc, envoyNode("c")) },
	} {
		c := open()
		c.Subscribe(EndpointType, reviews)
		c.ACK(c.Next())
		streams := ts.SheddableStreams()
		if len(streams) != len(ids)+1 {
			t.Fatalf("%d sheddable streams after %d clients: %+v", len(streams), len(ids)+1, streams)
		}
		clients, ids = append(clients, c), append(ids, streams[len(streams)-1].ID)
	}
	if n := ts.Shed(ids[0], ids[2]); n != 2 {
		t.Fatalf("Shed found %d streams open, want 2", n)
	}
	for _, c := range []*xdstest.TestClient{clients[0], clients[2]} {
		err := c.ExpectEnd(wait)
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "another replica") {
			t.Fatalf("%s: shed stream ended with %v, want Unavailable pointing to another replica", c.Node().GetId(), err)
		}
	}
	st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", "10.0.0.3"))
	if got := claAddrs(t, clients[1].Next()); !slices.Equal(got[reviews], []string{"10.0.0.1", "10.0.0.3"}) {
		t.Fatalf("the stream not shed got %v, want the new endpoints", got)
	}
	testenv.Eventually(t, "the shed streams gone", func() (bool, string) {
		g, e := ts.ClientCounts()
		left := ts.SheddableStreams()
		return g == 1 && e == 0 && len(left) == 1 && left[0].ID == ids[1], ""
	})
	if n := ts.Shed(ids[0]); n != 0 {
		t.Fatalf("shedding a closed stream found %d open", n)
	}
	if got := ts.ShedStreams(); got != 2 {
		t.Fatalf("%d streams counted as shed, want 2", got)
	}
}

// TestGRPCClientReconnectsAfterShed: a real grpc-go xDS client whose
// stream is shed reconnects on its own with a new stream, keeps its RPCs
// going meanwhile and gets the changes made after it.
func TestGRPCClientReconnectsAfterShed(t *testing.T) {
	b2, b3 := grpctest.StartBackend(t, "127.0.0.2", 0), grpctest.StartBackend(t, "127.0.0.3", 0)
	st := model.NewStore()
	svc := service("echo", "default", 9080)
	st.Update(svc, backendEndpoints(nil, b2, b3))
	ts := startServer(t, st)
	cc := xdsChannel(t, ts.addr, "default", "xds:///echo:9080")
	grpctest.AwaitSpread(t, cc, b2, b3)

	first := ts.SheddableStreams()
	if len(first) != 1 {
		t.Fatalf("%d sheddable streams for one client, want 1", len(first))
	}
	if n := ts.Shed(first[0].ID); n != 1 {
		t.Fatalf("Shed found %d streams, want 1", n)
	}
	testenv.Eventually(t, "the client back on a new stream", func() (bool, string) {
		now := ts.SheddableStreams()
		return len(now) == 1 && now[0].ID != first[0].ID, fmt.Sprintf("streams %+v", now)
	})
	if _, err := grpctest.Call(context.Background(), cc); err != nil {
		t.Fatalf("an RPC after the shed failed: %v", err)
	}
	st.Update(svc, backendEndpoints(nil, b3))
	grpctest.AwaitSpread(t, cc, b3)
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("the client sent %d NACKs:\n%s", n, ts.logs.String())
	}
}
