// Package xdstest is meshpilot's one xDS client for tests and benchmarks:
// an ADS stream, state of the world or delta, driven by hand or ACKing by
// itself, that keeps what it accepted the way a real client does.
//
// It imports nothing of meshpilot's, so that any package's tests (the xds
// server's own included) and meshbench can use it; type URLs are
// go-control-plane's (pkg/resource/v3).
//
// # The core
//
// Client needs no test: every method returns an error, and every wait
// takes a context.
//
//   - Open opens the stream; the first request carries the node. The
//     client then reads responses in a goroutine of its own into a queue
//     that Next reads; with Options.Paused it reads nothing until the
//     caller calls Receive or ReceiveInto (one response) or Start (all of
//     them), which is how a test makes a client that does not read and how
//     a caller reads in its own goroutine (meshbench's clients, with
//     Options.Forget, Options.Raw and ReceiveInto, cost no more per
//     response than a bare stream: they read the fields they follow from
//     the bytes).
//   - Subscribe, Unsubscribe and SetSubscription change what the client
//     asks for per type URL. On a state of the world stream every request
//     names the whole subscription and carries the type's last ACKed
//     version and last received nonce, as grpc-go does; on a delta stream
//     a request names what changed.
//   - ACK and NACK answer a response; with Options.AutoACK the client ACKs
//     every response itself before Next returns it (and NACKs one whose
//     resources do not decode). Send and SendDelta send a request as
//     written, for what a well-behaved client never does.
//   - What the client holds per type is what it ACKed: a state of the world
//     response of a full-state type (listeners, clusters) replaces the set,
//     one of another type (route configurations, ClusterLoadAssignments)
//     adds or replaces the resources it names; a delta response adds and
//     removes. A NACKed response changes nothing. Unsubscribing drops the
//     names. Held, Names, Version and the typed accessors (LoadAssignment,
//     Listener, Cluster, RouteConfiguration) read it; Await waits for a
//     condition on it, woken by each change rather than by a timer.
//
// # For tests
//
// TestClient wraps a Client for a test: Connect and Dial take a TB (any
// testing.TB), close the stream when the test ends, and its methods fail
// the test instead of returning errors; Next, Receive, ExpectEnd and the
// WaitFor helpers give up after Options.Wait and say what was expected and
// what the client holds. Only TestClient, Connect, Dial and TB are for
// tests.
package xdstest
