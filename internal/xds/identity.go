package xds

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/translate"
)

// This file decides whether a client may be served as the node it
// claims to be (Options.RequireIdentity): its identity is the SPIFFE ID
// of its verified client certificate, and the namespace its node claims,
// whose services it is then served, must be the identity's. Istio's
// istiod checks the same (pilot/pkg/xds authenticate and
// checkConnectionIdentity) and refuses a mismatch with PermissionDenied.
//
// Where meshpilot differs from istiod, it is stricter: the identity must
// be in the mesh's trust domain or one of its aliases (istiod takes any),
// and a certificate without a SPIFFE ID is refused like one for another
// namespace (istiod refuses it too: Unauthenticated without any subject
// alternative name, PermissionDenied when none is a matching SPIFFE ID).
// Like istiod, a node that claims no namespace is served when its
// certificate has a SPIFFE ID of the trust domain: it is then served
// only what is exported to every namespace.

// SPIFFEID is a workload identity as Istio issues it:
// spiffe://<trust domain>/ns/<namespace>/sa/<service account>.
type SPIFFEID struct {
	TrustDomain, Namespace, ServiceAccount string
}

func (id SPIFFEID) String() string {
	return "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// ParseSPIFFEID reads an identity of Istio's form; any other URI,
// SPIFFE or not, is an error.
func ParseSPIFFEID(uri string) (SPIFFEID, error) {
	rest, ok := strings.CutPrefix(uri, "spiffe://")
	if !ok {
		return SPIFFEID{}, fmt.Errorf("%q is not a SPIFFE ID", uri)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 || parts[1] != "ns" || parts[3] != "sa" || parts[0] == "" || parts[2] == "" || parts[4] == "" {
		return SPIFFEID{}, fmt.Errorf("%q is not a workload identity spiffe://<trust domain>/ns/<namespace>/sa/<service account>", uri)
	}
	return SPIFFEID{TrustDomain: parts[0], Namespace: parts[2], ServiceAccount: parts[4]}, nil
}

// peerIdentity is what a connection's client certificate says of the
// client.
type peerIdentity struct {
	// verified: the connection presented a client certificate that the
	// TLS handshake verified against the client CA.
	verified bool
	// uris are the certificate's URI subject alternative names, for the
	// log; ids those of them that are workload identities.
	uris []string
	ids  []SPIFFEID
}

// tlsStateKey carries a REST request's TLS state in its context, where
// the fetch callback finds it as a stream's callbacks find gRPC's peer.
type tlsStateKey struct{}

func withTLSState(ctx context.Context, cs *tls.ConnectionState) context.Context {
	return context.WithValue(ctx, tlsStateKey{}, cs)
}

// peerIdentityOf reads the identity of the client behind ctx: a gRPC
// stream's or a REST request's.
func peerIdentityOf(ctx context.Context) peerIdentity {
	cs, _ := ctx.Value(tlsStateKey{}).(*tls.ConnectionState)
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			cs = &info.State
		}
	}
	return identityOfTLS(cs)
}

// identityOfTLS reads the leaf of the first verified chain: a
// certificate the handshake did not verify says nothing.
func identityOfTLS(cs *tls.ConnectionState) peerIdentity {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return peerIdentity{}
	}
	p := peerIdentity{verified: true}
	for _, u := range cs.VerifiedChains[0][0].URIs {
		s := u.String()
		p.uris = append(p.uris, s)
		if id, err := ParseSPIFFEID(s); err == nil {
			p.ids = append(p.ids, id)
		}
	}
	return p
}

// identityError is a client refused for claiming what its certificate
// does not allow. The client gets it as PermissionDenied (HTTP 403 over
// REST).
type identityError struct {
	reason string
}

func (e *identityError) Error() string { return "meshpilot: permission denied: " + e.reason }

// GRPCStatus makes the error PermissionDenied for gRPC, and for the REST
// handler, which reads the code through the gateway's wrapping.
func (e *identityError) GRPCStatus() *status.Status {
	return status.New(codes.PermissionDenied, e.Error())
}

// entitled decides whether a client with identity p may be served as a
// node, and as which of its identities, of namespace ns (empty: it claims none) and service account sa
// (node metadata SERVICE_ACCOUNT; empty: it claims none), in a mesh of
// the given trust domains (the trust domain, then its aliases).
func entitled(p peerIdentity, trustDomains []string, ns, sa string) (SPIFFEID, *identityError) {
	if !p.verified {
		return SPIFFEID{}, &identityError{"no verified client certificate"}
	}
	var inDomain []SPIFFEID
	for _, id := range p.ids {
		if slices.Contains(trustDomains, id.TrustDomain) {
			inDomain = append(inDomain, id)
		}
	}
	if len(inDomain) == 0 {
		if len(p.uris) == 0 {
			return SPIFFEID{}, &identityError{fmt.Sprintf("the client certificate has no SPIFFE ID (spiffe://%s/ns/<namespace>/sa/<service account>)", trustDomains[0])}
		}
		return SPIFFEID{}, &identityError{fmt.Sprintf("the client certificate's identities %q are not workload identities of trust domain %s", p.uris, strings.Join(trustDomains, ", "))}
	}
	for _, id := range inDomain {
		if (ns == "" || id.Namespace == ns) && (sa == "" || id.ServiceAccount == sa) {
			return id, nil
		}
	}
	claim := "namespace " + ns
	if sa != "" {
		claim += ", service account " + sa
	}
	return SPIFFEID{}, &identityError{fmt.Sprintf("the node claims %s, which the client certificate's identities %q do not allow", claim, p.uris)}
}

// streamIdentities holds the identity of each open stream's client, from
// the stream's open (when the connection is known) to its close, and the
// node last found entitled, so that the requests of a stream whose node
// does not change are not checked again.
type streamIdentities struct {
	mu       sync.Mutex // guards byStream and its entries
	byStream map[streamKey]*streamIdentity
}

type streamIdentity struct {
	peer peerIdentity
	// node is the node last found entitled; nil before the first.
	node *core.Node
}

func (s *streamIdentities) open(key streamKey, p peerIdentity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byStream == nil {
		s.byStream = map[streamKey]*streamIdentity{}
	}
	s.byStream[key] = &streamIdentity{peer: p}
}

func (s *streamIdentities) close(key streamKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byStream, key)
}

// check decides for a request of a stream: node is the request's (nil
// when it carries none, after a delta stream's first request); the
// verdict is entitled's for that node. changed reports a node newly
// found entitled, as id.
func (s *streamIdentities) check(key streamKey, node *core.Node, entitled func(peerIdentity, *core.Node) (SPIFFEID, *identityError)) (id SPIFFEID, changed bool, err *identityError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byStream[key]
	if st == nil {
		return SPIFFEID{}, false, &identityError{"the stream is not open"}
	}
	if node == nil || node == st.node {
		if st.node != nil {
			return SPIFFEID{}, false, nil // the node the stream was found entitled to
		}
		return SPIFFEID{}, false, &identityError{"the stream's first request names no node"}
	}
	if id, err = entitled(st.peer, node); err != nil {
		return SPIFFEID{}, false, err
	}
	st.node = node
	return id, true, nil
}

// trustDomains are the mesh's trust domain and its aliases, as
// MeshConfig sets them now.
func (s *Server) trustDomains() []string {
	m := translate.GeneratorOptions{Mesh: s.opts.Mesh}.MeshSettings()
	return append([]string{m.TrustDomain}, m.TrustDomainAliases...)
}

// nodeEntitled is entitled for the namespace and service account a node
// claims: the namespace the generators serve it (translate.ClientFromNode).
func (s *Server) nodeEntitled(p peerIdentity, node *core.Node) (SPIFFEID, *identityError) {
	c := translate.ClientFromNode(node)
	sa := node.GetMetadata().GetFields()["SERVICE_ACCOUNT"].GetStringValue()
	return entitled(p, s.trustDomains(), c.Namespace, sa)
}

// authorizeStream refuses a stream whose first request names a node its
// client is not entitled to be (Options.RequireIdentity), which ends the
// stream, and returns the identity that entitles it. The node is read
// once: a stream keeps its first node.
func (s *Server) authorizeStream(st *xdsStream, node *core.Node) (string, error) {
	if !s.opts.RequireIdentity {
		return "", nil
	}
	id, _, err := s.identities.check(st.key, node, s.nodeEntitled)
	if err != nil {
		return "", s.refuseIdentity(st.key.name(), node.GetId(), err)
	}
	return id.String(), nil
}

// authorizeFetch is authorizeStream for a REST request.
func (s *Server) authorizeFetch(ctx context.Context, node *core.Node) error {
	if !s.opts.RequireIdentity {
		return nil
	}
	if _, err := s.nodeEntitled(peerIdentityOf(ctx), node); err != nil {
		return s.refuseIdentity("rest", node.GetId(), err)
	}
	return nil
}

// refuseIdentity logs a refused client, once per client and interval
// (clientLog): a refused grpc-go client reconnects and is refused again.
func (s *Server) refuseIdentity(stream, nodeID string, err *identityError) error {
	s.permissionDenied.Add(1)
	id := logID(nodeID)
	if ok, unlogged := s.identityLog.event(id, time.Now()); ok {
		s.log.Warn("xds: refusing a client its certificate does not entitle to its node", "client", id, "stream", stream,
			"reason", err.reason, "unlogged_since_last_line", unlogged, "next_line_for_this_client_after", s.identityLog.every)
	}
	return err
}

// PermissionDenied returns how many streams and REST requests were
// refused because the client's certificate does not entitle it to its
// node (Options.RequireIdentity).
func (s *Server) PermissionDenied() uint64 { return s.permissionDenied.Load() }
