package xds

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// bigEndpoints makes n endpoints, a ClusterLoadAssignment of a few
// hundred KiB: more than a stream's flow-control window and gRPC's
// per-stream write quota (64 KiB each) together.
func bigEndpoints(port uint32, n int) []*model.Endpoint {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&0xff, i&0xff)
	}
	return endpoints(port, model.Healthy, addrs...)
}

// TestStreamSendTimeout: a client that subscribes to two types and
// never reads, on a connection with the smallest flow-control windows
// gRPC allows, stalls the server's second send to it: each response is
// larger than the window and gRPC's write quota together, whichever
// goes first. Meanwhile another client gets
// every push, the stuck stream is sent nothing more however often its
// resources change (the server holds at most one response per type for
// it, never a queue of pushes), and once the send has waited
// StreamSendTimeout the stream ends with DeadlineExceeded, logged with
// the client, the type and the time waited. State of the world and
// delta.
func TestStreamSendTimeout(t *testing.T) {
	const timeout = 5 * time.Second
	big := "outbound|9080||big.default.svc.cluster.local"
	for _, delta := range []bool{false, true} {
		t.Run(fmt.Sprint("delta=", delta), func(t *testing.T) {
			t.Parallel()
			st := baseStore()
			st.Update(service("big", "default", 9080), bigEndpoints(9080, 10_000))
			// Clusters enough for a wildcard CDS response of a few hundred
			// KiB.
			for i := range 2000 {
				st.Update(service(fmt.Sprint("filler-", i), "default", 9080), nil)
			}
			ts := startServer(t, st, func(o *Options) { o.StreamSendTimeout = timeout })

			// Windows below 64 KiB are ignored by grpc-go: this is the
			// least a client can hold back.
			stuckCC := dial(t, ts.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
			stuck := xdstest.Connect(t, stuckCC, xdstest.Options{Node: envoyNode("stuck"), Delta: delta, Paused: true, Wait: wait})
			stuck.Subscribe(resource.EndpointType, big)
			stuck.Subscribe(resource.ClusterType) // every cluster
			var stuckInfo ClientInfo
			testenv.Eventually(t, "the stuck client's two responses under way", func() (bool, string) {
				for _, ci := range ts.Clients() {
					if ci.NodeID == "stuck" && ci.Types["CDS"] != nil && ci.Types["CDS"].LastSent != nil &&
						ci.Types["EDS"] != nil && ci.Types["EDS"].LastSent != nil {
						stuckInfo = ci
						return true, ""
					}
				}
				return false, fmt.Sprintf("%+v", ts.Clients())
			})
			firstEDS := stuckInfo.Types["EDS"].LastSent.Nonce

			normal := xdstest.Connect(t, dial(t, ts.addr), xdstest.Options{Node: envoyNode("normal"), Delta: delta, AutoACK: true, Wait: wait})
			normal.Subscribe(resource.EndpointType, big, reviews)
			normal.WaitFor(resource.EndpointType, big, reviews)
			for i := range 5 {
				ver := normal.Version(resource.EndpointType)
				st.Update(service("big", "default", 9080), bigEndpoints(9080, 10_000-1-i))
				st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.1", fmt.Sprintf("10.0.2.%d", i)))
				normal.WaitForNewVersion(resource.EndpointType, ver)
			}
			for _, ci := range ts.Clients() {
				if ci.NodeID == "stuck" && ci.Types["EDS"].LastSent.Nonce != firstEDS {
					t.Fatalf("the stuck client was sent endpoints again (nonce %s, first %s)", ci.Types["EDS"].LastSent.Nonce, firstEDS)
				}
			}

			testenv.Eventually(t, "the stuck stream closed", func() (bool, string) {
				for _, ci := range ts.Clients() {
					if ci.NodeID == "stuck" {
						return false, "still open"
					}
				}
				return true, ""
			})
			logs := ts.logs.String()
			// The type is the response sent second, whichever it was.
			want := fmt.Sprintf(`closing a stream whose client does not read: a response could not be sent within --stream-send-timeout" client=stuck stream=%s type=`,
				streamKey{stuckInfo.Stream, delta}.name())
			if !strings.Contains(logs, want+"CDS waited="+timeout.String()) && !strings.Contains(logs, want+"EDS waited="+timeout.String()) {
				t.Fatalf("no line %q(CDS|EDS) waited=%v in the log:\n%s", want, timeout, logs)
			}
			if n := ts.SendTimeouts(); n != 1 {
				t.Fatalf("%d streams ended by the send timeout, want 1", n)
			}
			// The normal client is still served.
			ver := normal.Version(resource.EndpointType)
			st.Update(service("reviews", "default", 9080), endpoints(9080, model.Healthy, "10.0.0.9"))
			normal.WaitForNewVersion(resource.EndpointType, ver)

			// Should the stuck client read after all, it gets what was
			// under way, then the end of its stream.
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			stuck.Start()
			var err error
			for err == nil {
				_, err = stuck.Client.Next(ctx)
			}
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "--stream-send-timeout") {
				t.Fatalf("the stuck stream ended with %v, want DeadlineExceeded naming --stream-send-timeout", err)
			}
		})
	}
}
