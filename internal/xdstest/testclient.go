package xdstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// This file is for tests only.

// TB is what a TestClient needs of a test; every testing.TB is one.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// DefaultWait bounds a TestClient's waits when Options.Wait is zero.
const DefaultWait = 30 * time.Second

// TestClient is a Client whose methods fail the test rather than return
// errors, and whose waits give up after Options.Wait. Call its methods
// from the test's goroutine.
type TestClient struct {
	*Client
	t    TB
	wait time.Duration
}

// Connect opens a stream on cc for the test and closes it when the test
// ends.
func Connect(t TB, cc grpc.ClientConnInterface, o Options) *TestClient {
	t.Helper()
	c, err := Open(context.Background(), cc, o)
	if err != nil {
		t.Fatalf("%v", err)
		return nil
	}
	t.Cleanup(c.Close)
	wait := o.Wait
	if wait == 0 {
		wait = DefaultWait
	}
	return &TestClient{Client: c, t: t, wait: wait}
}

// Dial connects to addr in plaintext, for the test, and opens a stream on
// the connection.
func Dial(t TB, addr string, o Options) *TestClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("xdstest: dialling %s: %v", addr, err)
		return nil
	}
	t.Cleanup(func() { _ = cc.Close() })
	return Connect(t, cc, o)
}

// fatalf fails the test, naming the client.
func (c *TestClient) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("xdstest: client %q: %s", c.opts.Node.GetId(), fmt.Sprintf(format, args...))
}

// check fails the test on a send error, except io.EOF: gRPC returns it
// from Send when the stream has already ended (a server that refuses a
// stream may end it before the client's first request is out), and the
// stream's real status is then what Next or ExpectEnd report, which is
// what a test asserts.
func (c *TestClient) check(err error) {
	c.t.Helper()
	if err != nil && !errors.Is(err, io.EOF) {
		c.fatalf("%v", err)
	}
}

// Subscribe is Client.Subscribe.
func (c *TestClient) Subscribe(typeURL string, names ...string) {
	c.t.Helper()
	c.check(c.Client.Subscribe(typeURL, names...))
}

// Unsubscribe is Client.Unsubscribe.
func (c *TestClient) Unsubscribe(typeURL string, names ...string) {
	c.t.Helper()
	c.check(c.Client.Unsubscribe(typeURL, names...))
}

// SetSubscription is Client.SetSubscription.
func (c *TestClient) SetSubscription(typeURL string, names ...string) {
	c.t.Helper()
	c.check(c.Client.SetSubscription(typeURL, names...))
}

// ACK is Client.ACK.
func (c *TestClient) ACK(r *Response) {
	c.t.Helper()
	c.check(c.Client.ACK(r))
}

// NACK is Client.NACK.
func (c *TestClient) NACK(r *Response, detail string) {
	c.t.Helper()
	c.check(c.Client.NACK(r, detail))
}

// Send is Client.Send.
func (c *TestClient) Send(req *discovery.DiscoveryRequest) {
	c.t.Helper()
	c.check(c.Client.Send(req))
}

// SendDelta is Client.SendDelta.
func (c *TestClient) SendDelta(req *discovery.DeltaDiscoveryRequest) {
	c.t.Helper()
	c.check(c.Client.SendDelta(req))
}

// Next returns the next response.
func (c *TestClient) Next() *Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.wait)
	defer cancel()
	r, err := c.Client.Next(ctx)
	if ctx.Err() != nil {
		c.fatalf("no response within %v", c.wait)
		return nil
	}
	if err != nil {
		c.fatalf("the stream ended: %v", err)
		return nil
	}
	return r
}

// Receive reads the next response of a paused client.
func (c *TestClient) Receive() *Response {
	c.t.Helper()
	type result struct {
		r   *Response
		err error
	}
	got := make(chan result, 1)
	// Recv cannot be given a deadline; once the test gives up, its cleanup
	// closes the stream, which ends this goroutine.
	go func() {
		r, err := c.Client.Receive()
		got <- result{r, err}
	}()
	select {
	case g := <-got:
		if g.err != nil {
			c.fatalf("the stream ended: %v", g.err)
			return nil
		}
		return g.r
	case <-time.After(c.wait):
		c.fatalf("no response within %v", c.wait)
		return nil
	}
}

// ExpectEnd waits up to within for the server to end the stream and
// returns the stream's error. A response read first fails the test.
func (c *TestClient) ExpectEnd(within time.Duration) error {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	r, err := c.Client.Next(ctx)
	switch {
	case ctx.Err() != nil:
		c.fatalf("the stream is still open after %v", within)
	case err == nil:
		c.fatalf("got a %s response (version %q) while waiting for the stream to end", shortType(r.TypeURL), r.Version)
	}
	return err
}

// WaitFor waits until the client holds exactly names of typeURL (none
// when no names are given).
func (c *TestClient) WaitFor(typeURL string, names ...string) {
	c.t.Helper()
	want := slices.Sorted(slices.Values(names))
	want = slices.Compact(want)
	c.waitUntil(func() bool { return slices.Equal(c.Names(typeURL), want) }, func() string {
		return fmt.Sprintf("%s: want exactly %q, holds %q (version %q)", shortType(typeURL), want, c.Names(typeURL), c.Version(typeURL))
	})
}

// WaitForNewVersion waits until the client has ACKed a response of
// typeURL whose version is not old, and returns that version.
func (c *TestClient) WaitForNewVersion(typeURL, old string) string {
	c.t.Helper()
	c.waitUntil(func() bool { return c.Version(typeURL) != old }, func() string {
		return fmt.Sprintf("%s: want a version other than %q, holds %q at that version", shortType(typeURL), old, c.Names(typeURL))
	})
	return c.Version(typeURL)
}

// WaitUntil waits until ok holds; what says what is awaited, for the
// failure message. ok may call the client's accessors.
func (c *TestClient) WaitUntil(what string, ok func() bool) {
	c.t.Helper()
	c.waitUntil(ok, func() string { return what })
}

func (c *TestClient) waitUntil(ok func() bool, describe func() string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.wait)
	defer cancel()
	if err := c.Await(ctx, ok); err != nil {
		why := fmt.Sprintf("not within %v", c.wait)
		if ctx.Err() == nil {
			why = err.Error()
		}
		c.fatalf("%s: %s", why, describe())
	}
}
