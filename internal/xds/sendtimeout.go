package xds

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultStreamSendTimeout is how long one response may take to be
// written to a stream (Options.StreamSendTimeout). A send waits only
// when HTTP/2 flow control is exhausted, that is when the client has
// not read the responses before it: a client that reads at all takes a
// response of a few MiB in well under a second, even across regions. 30
// s leaves a slow or briefly paused client (a long garbage collection,
// a CPU-starved sidecar) ample room while bounding how long a stuck one
// holds its stream. Istio's PILOT_XDS_SEND_TIMEOUT ends such a stream
// the same way; it was 5 s by default, which large pushes to busy
// proxies outgrew, and is off today, which leaves a stuck stream open
// for ever.
const DefaultStreamSendTimeout = 30 * time.Second

// sendTimeout ends a stream whose response could not be written in
// time. DeadlineExceeded, as Istio ends it: the client reconnects if it
// ever reads again.
type sendTimeout struct {
	typeURL string
	waited  time.Duration
}

func (e *sendTimeout) Error() string { return e.GRPCStatus().Message() }

func (e *sendTimeout) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, fmt.Sprintf(
		"meshpilot: a response could not be sent within %v (--stream-send-timeout): the client does not read its stream", e.waited))
}

// The send timeout needs no goroutine of its own: each stream's
// grpc.ServerStream is wrapped (guardedStream), and its SendMsg arms a
// timer (time.AfterFunc, a goroutine only when it fires) for as long as
// the send takes. A Send stuck on flow control waits in grpc-go for the
// write quota of the stream, and nothing the handler's context can do
// wakes it: cancelling a context derived from the stream's leaves the
// stream's own untouched. Ending the stream does: the transport stream's
// WriteStatus queues the status after the data under way and cancels the
// stream, which fails the stuck Send and the handler's Recv, and the
// handler returns. That is what grpc-go does when a handler returns,
// done from the timer instead; the status the handler then returns finds
// the stream ended and is dropped.

// guard wraps a stream.
func (s *Server) guard(st grpc.ServerStream) *guardedStream {
	return &guardedStream{ServerStream: st, srv: s, ctx: st.Context()}
}

// guardedStream is a stream whose sends are timed. SendMsg is called by
// the stream's sender alone (stream.go), one send at a time; the
// timer's callback runs in a goroutine of its own.
type guardedStream struct {
	grpc.ServerStream
	srv *Server
	ctx context.Context
	// key is the stream's number, known once the stream is admitted
	// (Server.open), for the log.
	key atomic.Pointer[streamKey]
	// ended is set once a send has timed out, so that no Send starts
	// after that.
	ended atomic.Bool
}

var errStreamEnded = status.Error(codes.Canceled, "meshpilot: the stream has ended")

// SendMsg writes a response, ending the stream if that takes longer than
// the send timeout.
func (g *guardedStream) SendMsg(m any) error {
	if g.ended.Load() {
		return errStreamEnded
	}
	typeURL := ""
	if r, ok := m.(interface{ GetTypeUrl() string }); ok {
		typeURL = r.GetTypeUrl()
	}
	t := time.AfterFunc(g.srv.sendTimeout, func() { g.timedOut(typeURL) })
	defer t.Stop()
	return g.ServerStream.SendMsg(m)
}

// statusWriter is what grpc-go's transport stream (in the stream's
// context as its grpc.ServerTransportStream) offers to end a stream with
// a status: grpc-go's own last call on every stream.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// timedOut ends the stream whose send has waited the send timeout: the
// first timeout wins. The log line comes first, so that it is written
// before the stream closes.
func (g *guardedStream) timedOut(typeURL string) {
	if !g.ended.CompareAndSwap(false, true) {
		return
	}
	why := &sendTimeout{typeURL: typeURL, waited: g.srv.sendTimeout}
	g.srv.sendTimedOut(g.key.Load(), why)
	if w, ok := grpc.ServerTransportStreamFromContext(g.ctx).(statusWriter); ok {
		if err := w.WriteStatus(why.GRPCStatus()); err == nil {
			return
		}
	}
	// A transport stream that cannot be ended alone (none is known to
	// grpc-go today): the connection goes, and the stream with it. Its
	// client is the one that does not read.
	if k := g.key.Load(); k != nil {
		g.srv.shed.closeConnOf(*k)
	}
}

// sendTimedOut logs and counts a stream ended by the send timeout.
func (s *Server) sendTimedOut(k *streamKey, e *sendTimeout) {
	s.sendTimeouts.Add(1)
	client, stream := "", ""
	if k != nil {
		if st := s.streams.get(*k); st != nil {
			client = logID(st.nodeIDOf())
		}
		stream = k.name()
	}
	s.log.Warn("xds: closing a stream whose client does not read: a response could not be sent within --stream-send-timeout",
		"client", client, "stream", stream, "type", s.typeLabel(e.typeURL), "waited", e.waited)
}

// SendTimeouts returns how many streams were ended because a response
// could not be sent within the send timeout.
func (s *Server) SendTimeouts() uint64 { return s.sendTimeouts.Load() }
