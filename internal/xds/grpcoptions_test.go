package xds

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestReceiveWindowBoundsUnreadRequests: a client whose stream waits
// (it does not read the responses, so the server's send is stuck and
// its requests are not read either) and that writes requests as fast as
// it can gets no more than the receive window of them accepted before
// its sends block, while a second stream on its connection keeps data
// flowing: the windows do not grow with it.
func TestReceiveWindowBoundsUnreadRequests(t *testing.T) {
	big := "outbound|9080||big.default.svc.cluster.local"
	st := baseStore()
	st.Update(service("big", "default", 9080), bigEndpoints(9080, 10_000))
	ts := startServer(t, st, func(o *Options) { o.StreamSendTimeout = 3 * time.Second })

	cc := dial(t, ts.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two responses larger than the client's window and the server's
	// write quota together: the second send waits.
	node := envoyNode("flood")
	for _, req := range []*discovery.DiscoveryRequest{
		{Node: node, TypeUrl: resource.EndpointType, ResourceNames: []string{big}},
		{TypeUrl: resource.ClusterType},
	} {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	// Requests of 16 KiB each, for a type nobody answers until asked
	// anew, and never read: they queue behind the stuck send.
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", strings.Repeat("x", 150), i)
	}
	flood := &discovery.DiscoveryRequest{TypeUrl: resource.ListenerType, ResourceNames: names}
	// A second stream on the connection whose requests are read at once
	// (stale nonces, which the server ignores) keeps data flowing, as a
	// client that wants the server's windows to grow makes it.
	pump, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := &discovery.DiscoveryRequest{Node: envoyNode("pump"), TypeUrl: resource.ListenerType, ResponseNonce: "stale", ResourceNames: names}
	for range 2000 { // 32 MiB
		if err := pump.Send(stale); err != nil {
			t.Fatal(err)
		}
		stale.Node = nil
	}
	sentCh := make(chan int)
	go func() {
		sent := 0
		for sent <= 64<<20 && stream.Send(flood) == nil {
			sent += proto.Size(flood)
		}
		sentCh <- sent
	}()
	// The stream ends, though the client, which does not read, never
	// learns it: the end waits behind the response under way.
	testenv.Eventually(t, "the send timeout ended the stream", func() (bool, string) {
		return ts.SendTimeouts() == 1, fmt.Sprint(ts.SendTimeouts(), " streams ended by the send timeout")
	})
	cancel() // fails the client's blocked send
	sent := <-sentCh
	// The server's window and the client's own write quota (64 KiB
	// each), and the request the server took before its send stuck:
	// about 150 KiB. With grpc-go's default windows, which grow with the
	// traffic of the connection's other stream, it is about 600 KiB
	// here, and 16 MiB at the most.
	const most = 256 << 10
	t.Logf("%d bytes of requests sent before the stream ended", sent)
	if sent > most {
		t.Fatalf("%d bytes of requests sent on a stream whose requests are not read, want at most %d", sent, most)
	}
}
