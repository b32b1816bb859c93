package xds

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// transportStream stands for grpc-go's transport stream in a stream's
// context, without WriteStatus; endableTransportStream has it, and
// records the statuses written in ended.
type transportStream struct {
	grpc.ServerTransportStream
	ended []*status.Status
}

type endableTransportStream struct{ *transportStream }

func (t endableTransportStream) WriteStatus(st *status.Status) error {
	t.ended = append(t.ended, st)
	return nil
}

// contextStream is a grpc.ServerStream with a context and nothing else.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s contextStream) Context() context.Context { return s.ctx }

// TestSendTimedOutEndsTheStream: a send that times out ends its stream
// once, through the transport stream's WriteStatus with
// DeadlineExceeded naming --stream-send-timeout; a transport stream
// without it has the client's connection closed instead. Either way the
// end is logged and counted once, and the stream refuses further sends.
func TestSendTimedOutEndsTheStream(t *testing.T) {
	for _, endable := range []bool{true, false} {
		t.Run(map[bool]string{true: "WriteStatus", false: "connection closed"}[endable], func(t *testing.T) {
			logs := &syncBuffer{}
			s := NewServer(Options{Discovery: model.NewStore(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
			server, client := net.Pipe()
			defer client.Close()
			s.shed.accepted(server)
			k := streamKey{id: 7}
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: server.RemoteAddr()})
			s.shed.add(ctx, k)

			ts := &transportStream{}
			var sts grpc.ServerTransportStream = ts
			if endable {
				sts = endableTransportStream{ts}
			}
			g := s.guard(contextStream{ctx: grpc.NewContextWithServerTransportStream(ctx, sts)})
			g.key.Store(&k)
			g.timedOut(resource.ClusterType)
			g.timedOut(resource.EndpointType) // a second timer: the first won

			if endable {
				if len(ts.ended) != 1 || ts.ended[0].Code() != codes.DeadlineExceeded ||
					!strings.Contains(ts.ended[0].Message(), "--stream-send-timeout") {
					t.Fatalf("statuses written %v, want one DeadlineExceeded naming --stream-send-timeout", ts.ended)
				}
			}
			// The connection is closed only when the stream cannot be
			// ended alone. A pipe reports its closing before a deadline.
			_ = client.SetReadDeadline(time.Now())
			_, err := client.Read(make([]byte, 1))
			if closed := errors.Is(err, io.EOF); closed == endable {
				t.Fatalf("connection closed %v, want %v (read: %v)", closed, !endable, err)
			}
			if n := s.SendTimeouts(); n != 1 {
				t.Fatalf("%d send timeouts counted, want 1", n)
			}
			if n := strings.Count(logs.String(), "closing a stream whose client does not read"); n != 1 ||
				!strings.Contains(logs.String(), "stream=sotw/7 type=CDS") {
				t.Fatalf("want one line for sotw/7 and CDS, got %d:\n%s", n, logs.String())
			}
			if err := g.SendMsg(nil); status.Code(err) != codes.Canceled {
				t.Fatalf("a send after the end: %v, want Canceled", err)
			}
		})
	}
}
