// Package serviceentry is the registry of Istio's ServiceEntries and
// WorkloadEntries (networking.istio.io/v1), read from a crd.Store (a
// cluster's informers or a folder's manifests). It is a source of the
// aggregate registry, after the Kubernetes registry: on a hostname both
// define, the Kubernetes Service's definition is served, as in Istio.
//
// A ServiceEntry gives one model.Service per host, in its namespace:
// hosts are taken as written (a short name is refused; a wildcard host
// is reported and not served), addresses are kept as the service's
// addresses, ports carry number, protocol, name and targetPort, location
// MESH_EXTERNAL sets MeshExternal, exportTo is kept (the xDS generators
// hide the service from the namespaces it does not name). Resolution:
//
//   - STATIC: load-balanced by the client over spec.endpoints (IP
//     addresses), or the WorkloadEntries and ready Pods of its namespace
//     that its workloadSelector selects; an endpoint's port for a service
//     port is its ports entry of that name (a Pod has none), else the
//     target port.
//   - DNS and DNS_ROUND_ROBIN (at most one endpoint, as Istio
//     validates it): model.DNSAlias. Without endpoints each host
//     resolves itself (ExternalName = the host): a LOGICAL_DNS cluster,
//     which grpc-go resolves too, so gRPC clients reach it (istiod gives
//     them nothing). With endpoints (names or IPs) Envoy gets a
//     STRICT_DNS cluster over all of them and gRPC clients, which have no
//     STRICT_DNS, a LOGICAL_DNS cluster to the first (see internal/translate).
//   - NONE: the service without endpoints, reported: meshpilot does not
//     send Envoy's passthrough (ORIGINAL_DST) cluster, and gRPC clients
//     have no dialled address to pass through to.
//
// A WorkloadEntry (address, ports, labels, locality "region/zone/subzone",
// weight, serviceAccount, network) is an endpoint of every ServiceEntry of
// its namespace whose workloadSelector matches its labels, and, as in
// Istio, of every Kubernetes Service of its namespace whose selector
// matches them: its port there is its ports entry of the service port's
// name, else the service's target port. This registry holds those
// endpoints without defining the Kubernetes Service; the aggregate unions
// them with the Kubernetes endpoints by port name.
//
// Objects that cannot work are refused (configstatus, one log line):
// no hosts, a port without number or name or with a protocol Istio does
// not know (one without protocol is served, its protocol unknown, as
// istiod serves it), an endpoint address
// that is not an IP under STATIC, a DNS entry without endpoints whose
// host cannot be resolved, a host that an earlier ServiceEntry (by name)
// of the namespace defines, a WorkloadEntry without address. A refused
// object's last good version stays in force. Several namespaces may each
// define a host: every definition is kept, the oldest first, and each
// client gets the one its namespace sees (model.WithDefinitions,
// Service.ForNamespace), as istiod keeps one per namespace.
//
// Every change rebuilds the model from the objects in force, and the
// model.Store reports only what changed: a ServiceEntry's change touches
// its hosts' services, a WorkloadEntry's the endpoints of what selects
// it. Pod changes come from the Kubernetes registry (Pods) on its
// informer goroutines; they are noted and applied on Run's goroutine, and
// only when an entry of the Pod's namespace has a workloadSelector.
package serviceentry
