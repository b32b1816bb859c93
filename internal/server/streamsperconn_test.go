package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestStreamsPerConnectionAreBounded: by default one connection holds at
// most DefaultMaxStreamsPerConnection streams. A grpc-go client's next
// stream on it waits until one of them ends, while another connection
// opens its streams as usual.
func TestStreamsPerConnectionAreBounded(t *testing.T) {
	reg := newRegistry()
	reg.synced.Store(true)
	s := start(t, Options{Sources: reg.sources()})
	dial := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(s.XDSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	node := func(i int) xdstest.Options {
		id := fmt.Sprintf("sidecar~10.0.0.9~c%d.default~default.svc.cluster.local", i)
		return xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: id, Namespace: "default"})}
	}
	// open opens a stream on cc within d and waits for its first
	// response, so that the server holds it.
	open := func(cc *grpc.ClientConn, i int, d time.Duration) (*xdstest.Client, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err := xdstest.Open(context.Background(), cc, node(i))
		if err != nil {
			return nil, err
		}
		if err := c.Subscribe(resourcev3.ListenerType, "echo:7070"); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := c.Next(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}

	cc := dial()
	held := make([]*xdstest.Client, 0, DefaultMaxStreamsPerConnection)
	for i := range DefaultMaxStreamsPerConnection {
		c, err := open(cc, i, 30*time.Second)
		if err != nil {
			t.Fatalf("stream %d of one connection: %v", i+1, err)
		}
		t.Cleanup(c.Close)
		held = append(held, c)
	}

	// The next stream on that connection is not served: grpc-go holds it
	// back until the connection has room.
	waiting := make(chan error, 1)
	var next *xdstest.Client
	go func() {
		c, err := open(cc, DefaultMaxStreamsPerConnection, 30*time.Second)
		next = c
		waiting <- err
	}()
	select {
	case err := <-waiting:
		t.Fatalf("stream %d of one connection served at once (err %v), want it held back", DefaultMaxStreamsPerConnection+1, err)
	case <-time.After(500 * time.Millisecond):
	}

	// Another connection is served meanwhile.
	other, err := open(dial(), 0, 30*time.Second)
	if err != nil {
		t.Fatalf("a stream of another connection: %v", err)
	}
	other.Close()

	// Once a stream of the first connection ends, the waiting one opens.
	held[0].Close()
	if err := <-waiting; err != nil {
		t.Fatalf("the waiting stream, once another ended: %v", err)
	}
	next.Close()
}
