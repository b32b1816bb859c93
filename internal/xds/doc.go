// Package xds serves meshpilot's service model to proxyless gRPC clients
// and Envoy over xDS. What it serves, internal/translate builds: one
// generator per type turns the model into the resource a name designates
// for a client, and says which model keys it read and which facts about
// the client it depends on; this package speaks the protocol, caches
// what the generators build and sends it, and defends itself against
// clients. The type URLs are in internal/xds/resource.
//
// # Server
//
// Server speaks the protocol itself (ADS state of the world and delta,
// the per-type services, REST-JSON): ads.go registers the services,
// stream.go runs each stream with go-control-plane's protocol rules
// (subscription.go: wildcards, subscriptions, what was sent; nonces),
// rest.go answers fetches. It keeps no snapshot: a client's request is
// answered (sotw.go, delta.go, rest.go) from resources generated on
// demand, held in a resource cache (cache.go) by name and client variant, and shared by
// every client that asks for the same thing, each marshalled once. The
// server never parses a name to learn what a resource depends on: the
// cache files each resource under the keys its generator returned, and
// each stream type is filed under the keys of what its waiting watch
// covers (watches.go; the filing outlives each watch), so a push drops and resends exactly what was built from
// the changed keys. A cached resource stays as the last push left it
// until a push changes one of its keys, even when the model moved on in
// between (a removal held back by the debouncer, say), and only while a
// client holds it: the cache holds resources weakly, and a client holds
// what it was sent until it is sent a newer version, unsubscribes or
// closes its stream (the client state below, and responses on their
// way); a REST request takes the cache's current resources under the
// server's lock, builds what the cache lacks outside it without caching
// it (rest.go), and holds nothing once answered. When the last
// holder lets go the garbage collector frees the resource, bytes and
// all, and the cache forgets it. The version of a resource is a hash of its
// bytes, so regenerating unchanged content sends nothing (a resource
// asked for again after it went, or rebuilt by a push, is the same
// version, and a push that rebuilds it unchanged keeps the one copy its
// clients hold); the version of a
// response starts with a per-process prefix, so versions differ across
// restarts. What a client holds is its stream's subscription state
// (names and versions last ACKed), so a NACKed response is not resent
// until something in it changes, and a closed stream leaves nothing
// behind.
//
// An idle stream costs one goroutine, grpc-go's handler, which
// receives; a push's responses are sent by a goroutine that the stream
// starts once the whole push is pending and that exits when none is left
// (stream.go), with at most one response per type waiting, sent
// clusters first, then endpoints, listeners, routes. The stream loop
// opens and cancels its watches through the watcher interface (seam.go)
// and never takes the server's lock; docs/architecture.md gives the
// protocol rules and the lock order.
//
// # Hostile clients
//
// A client gets a bounded share of the server, whatever it sends or
// fails to read. gRPC refuses a request longer than MaxRequestBytes
// (ResourceExhausted) before it is parsed, and holds at most
// ReceiveWindow of what a stream sent and the server has not read yet
// (grpcoptions.go: static windows); a request with more resource names
// than Options.MaxRequestNames (a delta request's two lists together,
// and a delta stream's subscription of a type) or a node larger than
// Options.MaxNodeBytes ends its stream with InvalidArgument, over REST
// 400 (limits.go), logged once per client and interval (clientlog.go).
// A response that cannot be written within Options.StreamSendTimeout
// (flow control exhausted: the client does not read) ends its stream
// with DeadlineExceeded (sendtimeout.go): each send arms a timer, which
// costs no goroutine while it waits, and on expiry the timer writes the
// status to grpc-go's transport stream, which fails the stuck send and
// the stream's receive so that the handler returns; until then the
// client holds at most one response per type, since a watch answers
// once and the next waits for the client's next request, and other
// clients' pushes never wait for it; its requests wait unread meanwhile.
// A stream names at most MaxTypesPerStream types, each type URL at most
// MaxTypeURLBytes long, and a delta stream's initial_resource_versions
// count against the names limit; a NACK's text is kept and logged
// truncated (MaxNACKBytes), at most one line per client and interval.
// New streams are paced (Options.MaxNewStreamsPerSecond, ratelimit.go),
// and client facts meshpilot does not know make no cache variant of
// their own (facts.go). A node's LABELS are kept within
// translate.MaxClientLabels and Kubernetes' sizes, and make a variant
// only of the routes that check them (sourceLabels): at most one per
// label set a client holds. A closed stream leaves no goroutine, client
// state, watch or unsent response behind.
//
// # Client state
//
// For operators (/debug/syncz, `meshpilot status`) each stream's own
// record tells, per resource type, the subscribed names, the latest
// response sent and the latest ACKed (version and nonce), and the latest
// NACK with its error (record.go); Clients returns a snapshot of every
// stream's, ConfigDump adds the resources of the ACKed responses. There
// is no second account of what a stream subscribes to: the record is
// the protocol state. What a stream costs is proportional to its
// subscriptions: its names once (an ACK that repeats them keeps the
// stream's list), the versions last sent, references to the shared
// resources it holds, and one waiting watch per type, which keeps
// nothing of its request. A response caused by a push carries the push's
// start (the moment the change reached meshpilot) to its send and,
// through the nonce, to the ACK; an Observer is told both durations,
// which is how convergence is measured without Prometheus in this
// package. Types meshpilot does not serve reach the Observer as
// "other": a type URL is the client's text, never a metric label.
//
// # Who may ask
//
// With Options.RequireIdentity (meshpilot serve --xds-client-ca) a client
// is served only as a node its verified client certificate entitles it
// to be (identity.go): the certificate's SPIFFE ID
// spiffe://<trust domain>/ns/<namespace>/sa/<service account>, in the
// mesh's trust domain or an alias, must name the namespace the node
// claims (NAMESPACE, else the node id: the namespace the generators then
// serve), and the service account when the node names one, as istiod's
// identity check does. Otherwise its stream ends with PermissionDenied,
// or its REST request with 403, at the first request that names such a
// node; the refusal is logged once per client per interval. What a
// client entitled to a namespace sees is what the generators let that
// namespace see (internal/translate's visibility.go).
package xds
