package server

import (
	"context"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestMaxClients: Options.MaxClients reaches the xDS server; a stream
// beyond it is refused with ResourceExhausted and counted on /metrics, and
// a grpc-go xDS client refused so fails its RPCs instead of waiting.
func TestMaxClients(t *testing.T) {
	reg := newRegistry()
	reg.synced.Store(true)
	s := start(t, Options{Sources: reg.sources(), MaxClients: 1})
	cc, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	node := xdstest.GRPCNode(xdstest.NodeOptions{ID: "sidecar~10.0.0.9~c.default~default.svc.cluster.local", Namespace: "default"})
	first := xdstest.Connect(t, cc, xdstest.Options{Node: node})
	first.Subscribe(resourcev3.ListenerType, "echo:7070")
	first.Next()

	second := xdstest.Connect(t, cc, xdstest.Options{Node: node})
	// The request may find the stream already ended.
	_ = second.Client.Subscribe(resourcev3.ListenerType, "echo:7070")
	if err := second.ExpectEnd(30 * time.Second); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the stream beyond --max-clients 1: %v, want ResourceExhausted", err)
	}
	metrics := getBody(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{
		`meshpilot_xds_refused_streams_total{reason="max_clients"} 1`,
		`meshpilot_xds_refused_streams_total{reason="not_ready"} 0`,
		`meshpilot_xds_clients{type="grpc"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// grpc-go turns the refused ADS stream into a resolver error: RPCs
	// fail with Unavailable, carrying the server's message, rather than
	// wait for resources that never come.
	ch := grpctest.Channel(t, s.XDSAddr(), "xds:///echo.default.svc.cluster.local:7070", grpctest.ChannelOptions{})
	deadline := time.Now().Add(grpctest.Wait)
	for {
		_, err := grpctest.Call(context.Background(), ch)
		if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "--max-clients") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a grpc-go client beyond --max-clients: last RPC error %v, want Unavailable naming --max-clients", err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
