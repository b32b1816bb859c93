package xds

import (
	"fmt"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// What one request may carry. A request is held while it is handled,
// and what a stream reads of it (its names, its type, what its node
// says) for as long as the stream lives, so without bounds one client
// could make the server hold as much as it cares to send.
const (
	// MaxRequestBytes bounds one request as received: gRPC's receive
	// limit (grpc.MaxRecvMsgSize, set to it by the server package) and
	// a REST request's body. It is gRPC's own default, made explicit:
	// room for DefaultMaxRequestNames names of 400 bytes each, or a node
	// of DefaultMaxNodeBytes many times over.
	MaxRequestBytes = 4 << 20
	// DefaultMaxRequestNames bounds the resource names of one request
	// (Options.MaxRequestNames): a gRPC client names the listeners,
	// routes, clusters and endpoint assignments it uses, a few per
	// service it calls, and Envoy subscribes to everything with none.
	DefaultMaxRequestNames = 10_000
	// DefaultMaxNodeBytes bounds a request's node, its metadata
	// included (Options.MaxNodeBytes): an Istio sidecar's node is a few
	// KiB (labels, annotations, platform metadata).
	DefaultMaxNodeBytes = 64 << 10
	// MaxTypesPerStream bounds the types one stream asks for: a stream
	// keeps state for each type it names, and Envoy uses about a dozen
	// (listeners, routes, clusters, endpoints, secrets, runtime,
	// extension configs, ...).
	MaxTypesPerStream = 32
	// MaxTypeURLBytes bounds a type URL: the longest Envoy names is
	// under a hundred bytes, and a stream keeps and reports each it
	// names.
	MaxTypeURLBytes = 256
	// MaxNACKBytes bounds a NACK's error text as kept and logged: a
	// client may send megabytes, and the first kilobyte says why.
	MaxNACKBytes = 1 << 10
)

// otherType labels, in metrics and logs, every type meshpilot does not
// serve: a type URL is the client's text, and each distinct one would
// be a series of its own.
const otherType = "other"

// requestLimits are what one request may carry; zero fields take the
// defaults.
type requestLimits struct {
	names     int // resource names, subscribed and unsubscribed together
	nodeBytes int // the node's encoded size
}

func (l requestLimits) withDefaults() requestLimits {
	if l.names <= 0 {
		l.names = DefaultMaxRequestNames
	}
	if l.nodeBytes <= 0 {
		l.nodeBytes = DefaultMaxNodeBytes
	}
	return l
}

// check says why a request is refused, or nil. A delta request's
// subscribe and unsubscribe lists count together: both are held and
// walked. A request without a node (every one but the first, usually)
// has nothing to measure there.
func (l requestLimits) check(names, unsubscribe []string, node *core.Node) *limitError {
	if n := len(names) + len(unsubscribe); n > l.names {
		return &limitError{what: "resource names", got: n, limit: l.names, flag: "--max-request-names"}
	}
	if node != nil {
		if n := proto.Size(node); n > l.nodeBytes {
			return &limitError{what: "bytes of node", got: n, limit: l.nodeBytes}
		}
	}
	return nil
}

// checkType bounds the type URLs of a stream: known says the stream has
// the type already, count how many it has.
func (l requestLimits) checkType(url string, known bool, count int) *limitError {
	if len(url) > MaxTypeURLBytes {
		return &limitError{what: "bytes of type URL", got: len(url), limit: MaxTypeURLBytes}
	}
	if !known && count >= MaxTypesPerStream {
		return &limitError{what: "types on the stream", got: count + 1, limit: MaxTypesPerStream}
	}
	return nil
}

// checkSubscribed bounds what a delta stream subscribes to over many
// requests, each within the limit: n is the subscription's size once
// the request is applied.
func (l requestLimits) checkSubscribed(n int) *limitError {
	if n > l.names {
		return &limitError{what: "resource names subscribed on the stream", got: n, limit: l.names, flag: "--max-request-names"}
	}
	return nil
}

// limitError is a request beyond a limit. The client gets it as
// InvalidArgument (HTTP 400 over REST): the same request will never
// pass, so retrying it is pointless.
type limitError struct {
	what       string
	got, limit int
	// flag is the option that sets the limit, if one does.
	flag string
}

func (e *limitError) Error() string {
	msg := "meshpilot: request refused: " + strconv.Itoa(e.got) + " " + e.what + ", more than the limit of " + strconv.Itoa(e.limit)
	if e.flag != "" {
		msg += " (" + e.flag + ")"
	}
	return msg
}

// GRPCStatus makes the error InvalidArgument for gRPC, and 400 for the
// REST handler.
func (e *limitError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.Error())
}

// reason is the refusal in a log line's words.
func (e *limitError) reason() string {
	return fmt.Sprintf("%d %s, limit %d", e.got, e.what, e.limit)
}

// refuse logs a request beyond a limit, once per client and interval
// (clientLog), counts it, and returns the error that ends the stream (or
// fails the REST request). stream is empty for REST.
func (s *Server) refuse(stream string, nodeID, typeURL string, err *limitError) error {
	s.refusedRequests.Add(1)
	id := logID(nodeID)
	if ok, unlogged := s.refusedLog.event(id, time.Now()); ok {
		s.log.Warn("xds: refusing a request beyond the limits", "client", id, "stream", stream,
			"type", s.typeLabel(typeURL), "reason", err.reason(),
			"unlogged_since_last_line", unlogged, "next_line_for_this_client_after", s.refusedLog.every)
	}
	return err
}

// RefusedRequests returns how many requests were refused for going
// beyond a limit.
func (s *Server) RefusedRequests() uint64 { return s.refusedRequests.Load() }
