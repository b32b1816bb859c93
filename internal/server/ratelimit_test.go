package server

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestNewStreamsRateOnMetrics: Options.MaxNewStreamsPerSecond reaches the
// xDS server, and the streams it refuses are counted on /metrics as
// rate_limited.
func TestNewStreamsRateOnMetrics(t *testing.T) {
	reg := newRegistry()
	reg.synced.Store(true)
	s := start(t, Options{Sources: reg.sources(), MaxNewStreamsPerSecond: 0.5})
	cc, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	node := xdstest.GRPCNode(xdstest.NodeOptions{ID: "sidecar~10.0.0.9~c.default~default.svc.cluster.local", Namespace: "default"})
	// One stream a second and a half: of three opened at once, the first
	// is admitted and the last cannot get a turn within a second.
	refused := 0
	for _, c := range []*xdstest.TestClient{
		xdstest.Connect(t, cc, xdstest.Options{Node: node}),
		xdstest.Connect(t, cc, xdstest.Options{Node: node}),
		xdstest.Connect(t, cc, xdstest.Options{Node: node}),
	} {
		defer c.Close()
		_ = c.Client.Subscribe(resourcev3.ListenerType, "echo:7070")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Client.Next(ctx)
		cancel()
		switch status.Code(err) {
		case codes.OK:
		case codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("a stream: %v, want a response or ResourceExhausted", err)
		}
	}
	if refused == 0 {
		t.Fatal("no stream refused at 0.5 new streams a second")
	}
	m := regexp.MustCompile(`meshpilot_xds_refused_streams_total\{reason="rate_limited"\} (\d+)`).FindStringSubmatch(getBody(t, "http://"+s.HTTPAddr()+"/metrics"))
	if m == nil || m[1] != strconv.Itoa(refused) {
		t.Fatalf("/metrics counts %v rate-limited streams, want %d", m, refused)
	}
}
