package translate

import (
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// inboundSecurity is what a gRPC server's listener enforces: the
// transport of its port and who may call it.
type inboundSecurity struct {
	// MutualTLS: the chain requires TLS with a client certificate of the
	// mesh; otherwise it is plaintext.
	MutualTLS bool
	// Filters are the RBAC filters to run before the router (rbacFilters).
	Filters []*hcm.HttpFilter
}

// inboundSecurity decides the transport and authorization of the server
// t describes, a workload of namespace ns listening on port, and appends
// to deps what that read: the keys of every policy that could select
// the workload (by namespace, by each of its labels, by its services),
// the root namespace, and, when the listener checks identities, the
// mesh's trust domains.
//
// The workload's labels and services come from the model's endpoints at
// the server's addresses, not from its node, so the answer needs no
// variant beyond the namespace and addresses the listener already
// varies by.
func (g *listenerGenerator) inboundSecurity(ns string, t inboundTargets, port int32, deps []model.ConfigKey) (inboundSecurity, []model.ConfigKey) {
	var policies model.SecurityPolicies
	if g.Security != nil {
		policies = g.Security.SecurityPoliciesFor(ns)
		deps = model.AppendWorkloadSecurityKeys(deps, ns, policies.RootNamespace, t.Labels, t.ServiceNames)
		deps = append(deps, model.MeshRootNamespaceKey)
	}
	mode, found := model.MTLSFor(policies, ns, t.Labels, uint32(port))
	sec := inboundSecurity{MutualTLS: grpcServerMTLS(mode, t.MutualTLS)}
	authz := model.AuthorizationPoliciesFor(policies, ns, t.Labels, t.ServiceNames)
	// A PeerAuthentication's mutual TLS admits only the mesh's trust
	// domains; a server that requires mutual TLS by its label alone
	// keeps what it had before policies existed (any certificate of the
	// CA), so that adding meshpilot's policy support changes nothing for
	// a mesh that writes none.
	checkTrustDomain := sec.MutualTLS && found
	if checkTrustDomain || len(authz) > 0 {
		// The trust domain check and the principals' aliases read them.
		deps = append(deps, model.MeshTrustDomainKey)
	}
	sec.Filters = rbacFilters(authz, g.MeshSettings(), checkTrustDomain)
	return sec, deps
}

// grpcServerMTLS says whether a gRPC server whose port's
// PeerAuthentication mode is mode requires mutual TLS, as istiod's
// grpcgen decides: STRICT does; DISABLE does not; PERMISSIVE (also the
// mode without any policy) cannot be served as Istio means it, both
// plaintext and mutual TLS on one port, because grpc-go drops a filter
// chain that matches a transport_protocol other than "raw_buffer" (gRFC
// A36) and so cannot tell TLS from plaintext connections. It is served
// as mutual TLS when the workload is labelled for it (labelledMTLS: auto
// mTLS, its clients will use TLS), as plaintext otherwise, as istiod
// serves it.
func grpcServerMTLS(mode model.MTLSMode, labelledMTLS bool) bool {
	switch mode {
	case model.MTLSStrict:
		return true
	case model.MTLSPermissive, model.MTLSUnset:
		return labelledMTLS
	}
	return false
}
