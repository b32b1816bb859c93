package xds

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestNewStreamsArePaced: beyond MaxNewStreamsPerSecond, a new stream
// that gets no turn within a second is refused with ResourceExhausted,
// counted as rate limited and logged once per interval; the admitted
// streams are served, and once the herd has passed a new stream is
// admitted again.
func TestNewStreamsArePaced(t *testing.T) {
	ts := startServer(t, baseStore(), func(o *Options) { o.MaxNewStreamsPerSecond = 2 })
	ts.newStreams.every = time.Hour // one line for the whole test
	cc := dial(t, ts.addr)

	// A herd of 12 streams at once: one turn now, then one every 500 ms,
	// and none waits more than a second, so at most 3 get in.
	const herd = 12
	var (
		mu       sync.Mutex
		admitted []*xdstest.Client
		refused  uint64
		wg       sync.WaitGroup
	)
	for range herd {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			c, err := xdstest.Open(context.Background(), cc, xdstest.Options{Node: envoyNode("herd")})
			if err != nil {
				t.Error(err)
				return
			}
			_ = c.Subscribe(resource.EndpointType, reviews) // may find the stream ended
			_, err = c.Next(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, c)
				return
			case status.Code(err) != codes.ResourceExhausted:
				t.Errorf("a stream of the herd: %v, want a response or ResourceExhausted", err)
			case !strings.Contains(status.Convert(err).Message(), "--max-new-streams-per-second"):
				t.Errorf("refused with %q, which does not name the flag", status.Convert(err).Message())
			default:
				refused++
			}
			c.Close()
		})
	}
	wg.Wait()
	for _, c := range admitted {
		c.Close()
	}
	if len(admitted) == 0 || len(admitted) > 3 || refused != herd-uint64(len(admitted)) {
		t.Fatalf("%d of %d streams admitted, %d refused: want 1 to 3 admitted and the rest refused", len(admitted), herd, refused)
	}
	if got := ts.RefusedStreams(); got.RateLimited != refused || got.MaxClients != 0 || got.NotReady != 0 {
		t.Fatalf("refused streams %+v, want %d rate limited and nothing else", got, refused)
	}
	if n := strings.Count(ts.logs.String(), "refusing new streams beyond --max-new-streams-per-second"); n != 1 {
		t.Fatalf("%d refusal lines logged for %d refusals, want 1", n, refused)
	}

	// The herd gone, a new stream gets its turn.
	c := openADS(t, cc, grpcNode("later", "default"))
	c.Subscribe(resource.EndpointType, reviews)
	c.Next()
}

// TestNoRateByDefault: without MaxNewStreamsPerSecond a herd of streams
// is admitted at once, every one of them.
func TestNoRateByDefault(t *testing.T) {
	ts := startServer(t, baseStore())
	if ts.newStreams != nil {
		t.Fatal("a rate limit without MaxNewStreamsPerSecond")
	}
	cc := dial(t, ts.addr)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			c, err := xdstest.Open(context.Background(), cc, xdstest.Options{Node: envoyNode("herd")})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if err := c.Subscribe(resource.EndpointType, reviews); err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Next(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := ts.RefusedStreams(); got != (RefusedStreams{}) {
		t.Fatalf("refused streams %+v, want none", got)
	}
}
