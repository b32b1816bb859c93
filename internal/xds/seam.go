package xds

import (
	"context"
	"log/slog"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/meshpilot/meshpilot/internal/translate"
)

// watcher is the seam between the stream loop and the resources, as
// go-control-plane's ConfigWatcher is between its server and its
// caches: the loop opens and cancels its watches through it and never
// takes the server's lock. The Server implements it with its resource
// cache and watch index (server.go); the loop's tests with a fake.
type watcher interface {
	// watch opens w. The watcher answers it at most once, by w.answer,
	// when the client lacks something of what w covers: at once, before
	// watch returns, or on a later push, after which it kicks the
	// stream (xdsStream.kick) once every watch the push woke answered.
	watch(w *watch)
	// cancel closes w (nil: none): once cancel returns, w is never
	// answered.
	cancel(w *watch)
	// endType says the stream is done with the type (it ends): the
	// watcher lets go of what it keeps for the type's watches, which
	// outlives each of them (registration).
	endType(ts *typeState)
	// shareNames replaces names by the equal strings the watcher
	// already keeps, where it keeps them, so that streams share one
	// copy of each name.
	shareNames(typ int, names []string)
}

// streamEnv is what the stream loop needs besides the watcher: the
// served types, the client defences, and where it reports. The Server
// makes one for all its streams (Server.env); the loop's tests make
// their own.
type streamEnv struct {
	watcher watcher
	types   []translate.ResourceType
	limits  requestLimits
	log     *slog.Logger
	// observer, when set, is told of responses, ACKs and NACKs.
	observer Observer
	// clientOf reads a node.
	clientOf func(*core.Node) translate.Client
	// authorize checks that the stream's client may be the node its
	// first request names (nil when it names none), and returns the
	// identity that entitles it.
	authorize func(st *xdsStream, node *core.Node) (identity string, err error)
	// refuse logs and counts a request beyond a limit and returns the
	// error that ends the stream.
	refuse func(st *xdsStream, node *core.Node, typeURL string, err *limitError) error
	// nacked counts and logs a NACK.
	nacked func(nodeID string, k streamKey, label string, grpc bool, n *NACK)
	// closed is told of a stream that ended.
	closed func(st *xdsStream)
	// nextVersion makes a response version.
	nextVersion func() string
}

// typeOf finds a served type by URL.
func (e *streamEnv) typeOf(url string) (int, bool) {
	for i, t := range e.types {
		if t.URL == url {
			return i, true
		}
	}
	return 0, false
}

func (e *streamEnv) observeSent(label string, grpc bool, since time.Duration) {
	if e.observer != nil {
		e.observer.ResponseSent(label, grpc, since)
	}
}

func (e *streamEnv) observeACK(label string, grpc bool, since time.Duration) {
	if e.observer != nil {
		e.observer.ACKed(label, grpc, since)
	}
}

// debugEnabled: the env's log takes debug lines.
func (e *streamEnv) debugEnabled() bool { return e.log.Enabled(context.Background(), slog.LevelDebug) }
