package xds

import "google.golang.org/grpc"

// What a client costs the server, measured by TestStreamCost (a server
// process of its own, idle ADS streams each answered once, half state of
// the world and half delta, Go 1.26, grpc-go v1.85):
//
//   - A stream: 1 goroutine, grpc-go's handler, which receives (stream.go:
//     a sender goroutine runs only while a push's responses wait to be
//     sent), about 8 KiB of its stack, and about 4.3 KiB of heap:
//     grpc-go's stream and its contexts, the stream's protocol state
//     (subscriptions, what was sent, one waiting watch per type, and its
//     record for /debug/syncz; 5 KiB while a separate client tracker
//     kept the node and maps of what was sent; BenchmarkConvergedStreamHeap measures the state
//     of a client of five services by four types, 4.5 KiB without
//     grpc-go's). It was 2 goroutines, 12 KiB of stacks and 7 KiB
//     of heap with go-control-plane's server (its process loop and its
//     receiver, a reflect.Select over a channel per watch). The send
//     timeout adds a small wrapper and, while a send is under way, a
//     timer; no goroutine.
//   - A connection, besides its streams: 3 goroutines of grpc-go (reader,
//     writer, keepalive), about 11 KiB of their stacks, and about 8 KiB
//     of heap (its framer and HTTP/2 state). Its read buffer
//     (connReadBuffer) is taken from a pool only while data is there
//     (shed_read.go), instead of 8 KiB held by each; its write buffer is
//     shared between connections (grpc.SharedWriteBuffer) instead of 32
//     KiB each: an xDS connection is idle almost all the time, and
//     responses are still written whole.
//
// What a client can make the server hold beyond that is bounded by the
// options below: a request by MaxRequestBytes, and what it has sent that
// the server has not read yet by the receive windows.

// ReceiveWindow is the HTTP/2 flow-control window the server grants a
// stream and a connection for what it receives: a client can have no
// more than that sent and unread per stream. It is grpc-go's initial
// window, made static: by default grpc-go grows windows by bandwidth
// estimation up to 16 MiB, per stream, which a client that writes fast
// while its stream waits (its requests queue behind a response it does
// not read) turns into memory held for it. xDS requests are small, and
// grpc-go widens a stream's window for one larger message while it is
// read, so a static window costs a client nothing but a round trip for
// a request beyond it.
const ReceiveWindow = 64 << 10

// connReadBuffer is the size of a connection's read buffer: a request is
// read in pieces of this size, into a buffer an idle connection does not
// hold (shed_read.go).
const connReadBuffer = 8 << 10

// GRPCServerOptions are the options the gRPC server serving xDS needs:
// its receive limit, MaxRequestBytes (gRPC ends a stream whose request
// is longer with ResourceExhausted before it is parsed), static receive
// windows (ReceiveWindow), and the smallest per-connection buffers.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.InitialWindowSize(ReceiveWindow),
		grpc.InitialConnWindowSize(ReceiveWindow),
		grpc.ReadBufferSize(connReadBuffer),
		grpc.SharedWriteBuffer(true),
	}
}
