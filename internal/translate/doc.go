// Package translate builds the xDS resources meshpilot serves from the
// service model: listeners, route configurations, clusters and
// ClusterLoadAssignments, for proxyless gRPC clients and Envoy. It knows
// nothing of streams, subscriptions or caches: the server (internal/xds)
// asks it for the resource of a type, a name and a client (Client, read
// from the client's node by ClientFromNode), and caches the answer under
// the model keys and the facts about the client the answer says it
// depends on.
//
// # Generators
//
// One Generator per type (listener.go, route.go, cluster.go, endpoint.go;
// listed in Generators) builds resources from the model, following the
// xDS naming contract (internal/model's names.go). Given a client and a
// name it returns the resource, the model keys it read (model.ConfigKey:
// a service's definition, a service's endpoints, their identities, a
// namespace's set of services, the mesh settings, the DestinationRules of
// a host) and the facts about the client it depends on (Vary). A new
// type is one file and one line in Generators.
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
//     route, and on the keys of the host's rules (model.AppendRuleKeys). When a
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
//     to the client's namespace) sets its traffic policy, merged for the
//     port and subset as istiod merges it (model.DestinationRule.PolicyFor)
//     (policy.go: load balancing, consistent hash, outlier detection;
//     cluster_connpool.go: Envoy's circuit breakers and connection
//     options, istiod's defaults without a rule, so that every cluster
//     varies by kind; gRPC clients get http2MaxRequests alone; tls.go: TLS, from certificate provider instances
//     for gRPC clients, from the agent's SDS for Envoy, ISTIO_MUTUAL
//     verifying the SPIFFE names of the endpoints' service accounts, so
//     depending on model.ServiceAccountsKey and not on the endpoints;
//     what gRPC clients cannot honour they get otherwise, varying by
//     kind) and defines subsets: "outbound|<port>|<subset>|<FQDN>"
//     exists for a subset of that rule. What reads a rule depends on
//     model.AppendRuleKeys (the host's own key, those of the wildcard
//     hosts with rules that match it, and "*", which also stands for
//     the set of wildcard hosts), and varies by namespace when rules of
//     several namespaces could apply. Subset clusters are served by name,
//     not in wildcard lists yet.
//   - ClusterLoadAssignment (a subset's: the endpoints its labels
//     select): one locality entry per region/zone/subzone,
//     weighted by its number of HEALTHY endpoints (their weights, when
//     WorkloadEntries set them), each endpoint with its health and weight; an address:port appears once. A locality with no HEALTHY
//     endpoint is left out for gRPC clients and sent without a weight to
//     Envoy: then one resource name has two variants, one per client
//     kind; otherwise both kinds share one. The localityLbSetting of the
//     cluster's rule policy, else MeshConfig's (endpoint_locality.go; the
//     mesh's depends on model.MeshLocalityLBKey, so its change
//     regenerates endpoint assignments only; every assignment reads the
//     host's rules) orders localities by closeness to the client
//     (failover, for a cluster whose rule sets outlier detection, as
//     Istio) or reweighs them (distribute); a service's
//     trafficDistribution comes between the two. Endpoints carry the
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
package translate
