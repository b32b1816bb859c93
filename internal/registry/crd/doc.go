// Package crd watches Istio's configuration in a cluster: the traffic
// kinds, DestinationRules, VirtualServices, ServiceEntries and
// WorkloadEntries (networking.istio.io/v1), and the security kinds,
// PeerAuthentications and AuthorizationPolicies (security.istio.io/v1),
// through shared informers on internal/kubeapi's narrow clients, one per
// API group version: istio.io/client-go's types, not its clientset, which
// would link every Istio API group. Beside them it watches the Gateway
// API's routes of the mesh, HTTPRoutes and GRPCRoutes
// (gateway.networking.k8s.io/v1), and ReferenceGrants (v1beta1), with
// sigs.k8s.io/gateway-api's types.
//
// The CustomResourceDefinitions are optional. Registry watches the nine
// CRDs themselves (one tiny informer each, by name); while a kind's CRD is
// not installed, or not Established, or does not serve v1, nothing is
// watched for it and meshpilot runs as it does without Istio, saying so in
// one log line. When a CRD appears later its informer starts at once,
// without a restart. A CRD that is removed again leaves its informer
// running: its objects are deleted with it, so the informer empties and
// its reflector retries quietly until the CRD returns.
//
// What the registry offers, for the conversions that will read it (the
// DestinationRule, VirtualService and ServiceEntry/WorkloadEntry rules):
//
//   - reads: DestinationRules, VirtualServices, ServiceEntries,
//     WorkloadEntries (every object in scope, ordered by namespace and
//     name) and DestinationRule, VirtualService, ServiceEntry,
//     WorkloadEntry (one object by namespace and name, or nil). Objects
//     come from the informer caches and are shared: callers must not
//     modify them (deep-copy first);
//   - change events (Event: kind, namespace, name), one per key after the
//     informer events for it, deduplicated by a rate-limited work queue.
//     An event says only that the object may have changed: the handler
//     reads its current state through the reads above, nil meaning
//     deleted. Updates that cannot matter (the same resourceVersion, as a
//     relist replays them; or a status-only write) emit nothing.
//
// The consumers below read a Store, not the Registry: a folder's
// manifests (the file registry's IstioStore) are one too. A Store that
// knows where each object was read is a Locator, and a consumer names an
// object for its status with Ref, so that a refusal in file mode says
// file, line and document.
//
// DestinationRules reach xDS through Policies (model.PolicyIndex): each
// converted (ConvertDestinationRule: short hosts resolved against the
// rule's namespace; subsets; loadBalancer.simple and consistentHash,
// http2MaxRequests, outlierDetection, tls,
// with portLevelSettings and per-subset overrides) and indexed by host;
// a change is a model.ConfigChanged event with the DestinationRuleKey of
// the hosts it touched, and exportTo limits which clients see it.
// A rule that cannot work (a wildcard host, not served yet; a subset
// without a name or labels, or named twice; a consistent hash without a
// key; MUTUAL TLS without a client certificate; ISTIO_MUTUAL with
// certificates of its own; a host that an earlier rule by name of its
// namespace has) is refused: its status (PolicyOptions.Status) says why,
// with the field, and its last good version stays in force (a rule
// shadowed by an earlier one applies once that one goes).
//
// VirtualServices reach xDS through Routes (model.RouteIndex): each
// converted for the mesh gateway (ConvertVirtualService: http routes with
// their matches, weighted destinations, timeout, retries and fault),
// refused when it cannot work (several destinations all of weight 0, a
// subset no DestinationRule defines, a regular expression that is not
// RE2, a host claimed by an older VirtualService of the namespace),
// served to gRPC clients as istiod serves them, and reported through a
// configstatus.Reporter (what grpc-go does not honour with it). A change is a model.ConfigChanged event with
// the VirtualServiceKey of the hosts it touched.
// HTTPRoutes and GRPCRoutes attached to Services (GAMMA) reach xDS
// through Routes too, when the Store is a GatewayStore: each converted
// as istiod converts it for the mesh (ConvertHTTPRoute,
// ConvertGRPCRoute), the routes of one namespace for one host merged by
// the Gateway API's precedence (MergeGatewayRoutes) into a
// model.VirtualService marked Gateway, which the index picks beside the
// VirtualServices as istiod does (a consumer route for its namespace
// alone). Their status per Service parent goes to a gwstatus.Writer,
// what clients do not get of them to the configstatus.Reporter; a
// ReferenceGrant, or a Service that comes or goes, converts them again.
// PeerAuthentications and AuthorizationPolicies reach gRPC servers'
// inbound listeners through Security (model.SecurityIndex): each
// converted (ConvertPeerAuthentication, ConvertAuthorizationPolicy) and
// refused as istiod's validation refuses it, with the field; its status
// says what a gRPC server cannot enforce as written (request
// authentication fails closed, AUDIT and CUSTOM are not served, as from
// istiod) and that Envoy does not get it from meshpilot. A Service
// targetRef applies the policy to the workloads behind the Service,
// where istiod applies targetRefs to waypoints and gateways only; the
// status says so. A change is a model.ConfigChanged event with the
// KindSecurity keys of the old and new versions.
//
// ServiceEntries and WorkloadEntries reach xDS through registry/
// serviceentry, a source of the aggregate registry that reads this
// Store. This registry is not a source itself, and its HasSynced is not
// part of readiness: rules that arrive later are pushed like any change.
package crd
