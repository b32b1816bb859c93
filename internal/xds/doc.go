// Package xds serves meshpilot's service model to proxyless gRPC clients
// and Envoy over xDS.
//
// # Generators
//
// One Generator per type (listener.go, route.go, cluster.go, endpoint.go;
// listed in generators) builds resources from the model, following the
// naming contract of DESIGN.md. Given a client and a name it returns the
// resource, the model keys it read (model.ConfigKey: a service's
// definition, a service's endpoints, their identities, a namespace's set
// of services, the
// mesh settings, the DestinationRules of a host) and
// the facts about the client it
// depends on (Vary). A new type is one file and one line in generators.
//
//   - Listener: the name a client asks for, "<host>:<port>", where host is
//     the FQDN or "<name>", "<name>.<namespace>", "<name>.<namespace>.svc"
//     relative to the client's namespace. It is an API listener whose
//     HttpConnectionManager takes route configuration
//     "outbound|<port>||<FQDN>" over ADS and ends with the fault filter
//     (which a route's VirtualService configures) and the router filter.
//   - Listener "xds.istio.io/grpc/lds/inbound/<ip>:<port>", what a gRPC
//     xDS server listening on that address asks for (gRFC A36;
//     listener_inbound.go): as istiod builds it, the name's address and
//     one plaintext filter chain whose HttpConnectionManager routes every
//     RPC to the server itself (an inline route with
//     non_forwarding_action, the router last), when a service of the
//     client's namespace has an endpoint at the client's address on that
//     port; otherwise none, and the server does not serve. A workload
//     labelled security.istio.io/tlsMode=istio gets the chain
//     "inbound-mtls" instead, requiring mutual TLS with the bootstrap's
//     certificate provider "default" (tls.go), as istiod does without a
//     PeerAuthentication.
//   - RouteConfiguration "outbound|<port>||<FQDN>": one virtual host whose
//     domains are the forms a client may use, routing "/" to the cluster of
//     the same name with istiod's default retry policy (retry.go: 2
//     retries on connection failures, UNAVAILABLE and CANCELLED), or the
//     one of the mesh settings (MeshConfig defaultHttpRetryPolicy; zero
//     attempts: none), and the hash policy of the consistent hash of the
//     host's DestinationRule (policy.go, hashPolicy). It depends on
//     model.MeshRetryKey, so a change of that setting regenerates every
//     route, and on the host's model.DestinationRuleKeys. When a
//     VirtualService routes the host for the client (model.RouteIndex,
//     route_vs.go) its routes come instead, one per match: weighted
//     clusters "outbound|<port>|<subset>|<FQDN>", the timeout (as
//     max_stream_duration for gRPC clients, as timeout for Envoy, as
//     istiod does), retries over the default, fault injection as the fault
//     filter's per-route config, the hash policy of each destination's
//     DestinationRule. Such a route depends on the host's
//     model.VirtualServiceKey and varies by client kind (and namespace
//     when VirtualServices of several namespaces could apply); a
//     VirtualService gRPC clients cannot honour leaves them the default
//     route.
//   - Cluster "outbound|<port>||<FQDN>": EDS over ADS, round robin, with a
//     healthy panic threshold of 0; for an ExternalName service or a DNS
//     ServiceEntry without endpoints (model.DNSAlias) a LOGICAL_DNS
//     cluster pointing at the external name and the service port; for a
//     DNS ServiceEntry with endpoints (cluster_dns.go) STRICT_DNS over them
//     for Envoy and LOGICAL_DNS to the first for gRPC clients (grpc-go has
//     no STRICT_DNS), depending on the host's endpoints. Ports that speak HTTP/2 (gRPC, gRPC-Web, HTTP2)
//     carry explicit HTTP/2 upstream options for Envoy. The DestinationRule
//     the client follows (model.PolicyIndex: its namespace's rule, else the
//     service's namespace's, else the root namespace's, each if exported
//     to the client's namespace) sets its traffic
//     policy (policy.go: load balancing, consistent hash, circuit breaker,
//     outlier detection; tls.go: TLS, from certificate provider instances
//     for gRPC clients, from the agent's SDS for Envoy, ISTIO_MUTUAL
//     verifying the SPIFFE names of the endpoints' service accounts, so
//     depending on model.ServiceAccountsKey and not on the endpoints;
//     what gRPC clients cannot honour they get otherwise, varying by
//     kind) and defines subsets: "outbound|<port>|<subset>|<FQDN>"
//     exists for a subset of that rule. What reads a rule depends on
//     model.DestinationRuleKeys(host) (its own and those of the wildcard
//     hosts that could match it), and varies by namespace when rules of
//     several namespaces could apply. Subset clusters are served by name,
//     not in wildcard lists yet.
//   - ClusterLoadAssignment (a subset's: the endpoints its labels
//     select): one locality entry per region/zone/subzone,
//     weighted by its number of HEALTHY endpoints (their weights, when
//     WorkloadEntries set them), each endpoint with its health and weight; an address:port appears once. A locality with no HEALTHY
//     endpoint is left out for gRPC clients and sent without a weight to
//     Envoy: then one resource name has two variants, one per client
//     kind; otherwise both kinds share one. MeshConfig localityLbSetting
//     (endpoint_locality.go; it depends on model.MeshLocalityLBKey, so its
//     change regenerates endpoint assignments only) orders localities
//     by closeness to the client (failover, for a cluster whose rule
//     sets outlier detection, as Istio) or reweighs them (distribute);
//     a service's trafficDistribution comes first. Endpoints carry the
//     cluster they are in (endpoint_cluster.go; none: the local cluster,
//     GeneratorOptions.LocalClusterID): a host whose endpoints span
//     clusters gives each Istio's istio.workload filter metadata
//     "<workload>;<namespace>;<canonical name>;<revision>;<cluster>", a
//     host of the local cluster alone none; a host MeshConfig
//     serviceSettings makes clusterLocal gives a client (node metadata
//     CLUSTER_ID; none: the local cluster) its own cluster's endpoints
//     only, varying by cluster. Every assignment depends on
//     model.MeshServiceSettingsKey.
//
// Unknown names get no resource. A service whose exportTo
// (model.Service.VisibleTo) hides it from the client's namespace is, for
// that client, an unknown host (visibility.go): a listener name skips it
// for the next candidate hostname, its route configuration, clusters and
// ClusterLoadAssignments are none, and a VirtualService destination to
// it names a cluster the client does not get. What reads such a service
// varies by namespace; a service exported to all (the common case) stays
// one resource for every client. Envoy (any client that is not gRPC) may
// subscribe to everything for clusters, endpoints and routes: the
// wildcard list (AllNames) is every service's names, the same for all
// clients, and each name is generated for the client like a named one,
// so a client is sent only what exists for it; a wildcard listener
// subscription gets an empty set, since meshpilot generates only the API
// listeners of proxyless gRPC clients.
//
// # Server
//
// Server speaks the protocol itself (ADS state of the world and delta,
// the per-type services, REST-JSON): ads.go registers the services,
// stream.go runs each stream with go-control-plane's protocol rules
// (subscription.go: wildcards, subscriptions, what was sent; nonces),
// rest.go answers fetches. It keeps no snapshot: a client's request is
// answered (sotw.go, delta.go, rest.go) from resources generated on demand, held in a
// resource cache (cache.go) by name and client variant, and shared by
// every client that asks for the same thing, each marshalled once. The
// server never parses a name to learn what a resource depends on: the
// cache files each resource under the keys its generator returned, and
// waiting watches are filed under the keys of what they cover
// (watches.go), so a push drops and resends exactly what was built from
// the changed keys. A cached resource stays as the last push left it
// until a push changes one of its keys, even when the model moved on in
// between (a removal held back by the debouncer, say), and only while a
// client holds it: the cache holds resources weakly, and a client holds
// what it was sent until it is sent a newer version, unsubscribes or
// closes its stream (the client state below, and responses on their
// way); a REST request holds nothing once answered. When the last
// holder lets go the garbage collector frees the resource, bytes and
// all, and the cache forgets it. The version of a resource is a hash of its
// bytes, so regenerating unchanged content sends nothing (a resource
// asked for again after it went, or rebuilt by a push, is the same
// version, and a push that rebuilds it unchanged keeps the one copy its
// clients hold); the version of a
// response starts with a per-process prefix, so versions differ across
// restarts. What a client holds is its stream's subscription state
// (names and versions last sent), so a NACKed version is not resent
// until its content changes, and a closed stream leaves nothing behind.
//
// An idle stream costs one goroutine, grpc-go's handler, which
// receives; a response is sent by a goroutine that the stream starts
// when one is ready and that exits when none is left (stream.go), with
// at most one response per type waiting, sent clusters first, then
// endpoints, listeners, routes.
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
// A closed stream leaves no goroutine, client state, watch or unsent
// response behind.
//
// # Client state
//
// For operators (/debug/syncz, `meshpilot status`) the server keeps, per
// stream and resource type, the subscribed names, the latest response sent
// and the latest ACKed (version and nonce), and the latest NACK with its
// error; Clients returns it, ConfigDump adds the resources of the ACKed
// responses. The stream loop tells it of each request and of each
// response before it is sent. What a stream costs is proportional to its
// subscriptions: its names once (an ACK that repeats them is made to
// share the stream's strings, so the stream's subscription holds no
// second copy of them), the versions last sent, references to the shared resources it
// holds, and one waiting watch per type, which keeps nothing of its
// request. A response caused by a push carries the push's start (the
// moment the change reached meshpilot) to its send and, through
// the nonce, to the ACK; an Observer is told both durations, which is how
// convergence is measured without Prometheus in this package.
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
// client entitled to a namespace sees is what visibility.go lets that
// namespace see.
package xds
