package xds

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testpki"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
)

// TestGRPCServerAuthorization runs a real grpc-go xDS server (its RBAC
// filter, gRFC A41, is grpc-go's own engine, which is not importable) and
// checks that it ACKs and enforces the filters meshpilot builds from
// AuthorizationPolicies: an ALLOW policy lets through only what it
// matches, a DENY policy refuses what it matches before any ALLOW, an
// ALLOW policy without rules refuses everything, and a DENY rule on what
// grpc-go cannot evaluate (request principals) denies more rather than
// nothing.
func TestGRPCServerAuthorization(t *testing.T) {
	st := model.NewStore()
	sec := &translatetest.Security{}
	ts := startServer(t, st, withSecurity(sec))
	port := grpctest.FreePort(t, "127.0.0.7")
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
		Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: int32(port), Protocol: model.GRPC}}}
	st.Update(echo, []*model.Endpoint{{Address: "127.0.0.7", Port: uint32(port), ServicePortName: "grpc", Namespace: "apps",
		Labels: map[string]string{"app": "echo"}}})
	srv := grpctest.StartXDSBackend(t, "127.0.0.7", port, serverBootstrap(t, ts.addr, "apps", "echo-1", "127.0.0.7"))
	srv.AwaitServing(t)

	const health = "/grpc.health.v1.Health/*" // grpctest.Call's method
	selector := model.Labels{"app": "echo"}
	byUser := func(user string) codes.Code {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", user)
		// A new connection: grpc-go applies a new listener to the
		// connections it accepts after it, draining the older ones.
		_, err := grpctest.Call(ctx, dial(t, srv.Addr))
		return status.Code(err)
	}
	// apply puts policies in force and waits until the server answers
	// each user as want says.
	apply := func(desc string, policies []*model.AuthorizationPolicy, want map[string]codes.Code) {
		t.Helper()
		old := sec.SecurityPoliciesFor("apps").Authz
		sec.Set("", nil, policies)
		var keys []model.ConfigKey
		for _, p := range append(old, policies...) {
			keys = append(keys, p.Keys()...)
		}
		ts.Push(securityChanged(keys...))
		deadline := time.Now().Add(wait)
		for {
			got := map[string]codes.Code{}
			for user := range want {
				got[user] = byUser(user)
			}
			if equalCodes(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: RPCs by user %v, want %v", desc, got, want)
			}
			time.Sleep(20 * time.Millisecond) // polling
		}
	}

	apply("no policy", nil, map[string]codes.Code{"alice": codes.OK, "bob": codes.OK})
	allowAlice := &model.AuthorizationPolicy{Namespace: "apps", Name: "alice", Selector: selector,
		Rules: []model.AuthzRule{{
			To:   []model.AuthzOperation{{Paths: []string{health}, Methods: []string{"POST"}}},
			When: []model.AuthzCondition{{Key: "request.headers[x-user]", Values: []string{"alice"}}},
		}}}
	apply("ALLOW alice", []*model.AuthorizationPolicy{allowAlice}, map[string]codes.Code{"alice": codes.OK, "bob": codes.PermissionDenied})
	denyLoopback := &model.AuthorizationPolicy{Namespace: "apps", Name: "loopback", Selector: selector, Action: model.AuthzDeny,
		Rules: []model.AuthzRule{{From: []model.AuthzSource{{IPBlocks: []string{"127.0.0.0/8"}}},
			When: []model.AuthzCondition{{Key: "request.headers[x-user]", Values: []string{"alice"}}}}}}
	apply("DENY before ALLOW", []*model.AuthorizationPolicy{allowAlice, denyLoopback}, map[string]codes.Code{"alice": codes.PermissionDenied, "bob": codes.PermissionDenied})
	apply("ALLOW nothing", []*model.AuthorizationPolicy{{Namespace: "apps", Name: "nothing", Selector: selector}},
		map[string]codes.Code{"alice": codes.PermissionDenied})
	apply("ALLOW every call", []*model.AuthorizationPolicy{{Namespace: "apps", Name: "all", Rules: []model.AuthzRule{{}}}},
		map[string]codes.Code{"alice": codes.OK, "bob": codes.OK})
	jwt := &model.AuthorizationPolicy{Namespace: "apps", Name: "jwt", Selector: selector, Action: model.AuthzDeny,
		Rules: []model.AuthzRule{{From: []model.AuthzSource{{RequestPrincipals: []string{"issuer/alice"}}},
			When: []model.AuthzCondition{{Key: "request.headers[x-user]", Values: []string{"alice"}}}}}}
	apply("DENY on request principals denies more", []*model.AuthorizationPolicy{jwt}, map[string]codes.Code{"alice": codes.PermissionDenied, "bob": codes.OK})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}

// TestGRPCServerStrictTrustDomain: a real grpc-go xDS server whose
// workload a STRICT PeerAuthentication selects (no tlsMode label) serves
// mutual TLS only, and refuses a client certificate of the mesh's CA
// whose SPIFFE identity is of another trust domain than the mesh's or an
// alias (grpc-go cannot check the client's SANs in the TLS context, so
// the RBAC DENY filter does); making that trust domain an alias lets it
// in.
func TestGRPCServerStrictTrustDomain(t *testing.T) {
	ca := testpki.New(t)
	serverCert, serverKey := ca.Issue(t, testpki.Leaf{Name: "echo", URIs: []string{"spiffe://cluster.local/ns/apps/sa/echo"}})
	mesh := translatetest.MeshWithClusterLocal()
	st := model.NewStore()
	sec := &translatetest.Security{}
	ts := startServer(t, st, withSecurity(sec), withMesh(mesh))
	port := grpctest.FreePort(t, "127.0.0.8")
	echo := &model.Service{Hostname: "echo.apps.svc.cluster.local", Name: "echo", Namespace: "apps",
		Ports: []model.Port{{Name: "grpc", Port: 9080, TargetPort: int32(port), Protocol: model.GRPC}}}
	st.Update(echo, []*model.Endpoint{{Address: "127.0.0.8", Port: uint32(port), ServicePortName: "grpc", Namespace: "apps",
		ServiceAccount: "echo", Labels: map[string]string{"app": "echo"}}})
	srv := grpctest.StartSecureXDSBackend(t, "127.0.0.8", port, meshBootstrap(t, bootstrap.Options{
		XDSServer: ts.addr, Namespace: "apps", Pod: "echo-1", IP: "127.0.0.8", Cert: serverCert, Key: serverKey, CACert: ca.File}))
	srv.AwaitServing(t)

	// as calls the server with a certificate of identity, or in
	// plaintext when identity is empty. The client does not verify the
	// server: what is tested is the server's check of the client.
	as := func(identity string) codes.Code {
		var opts []grpc.DialOption
		if identity != "" {
			opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
				Certificates:       []tls.Certificate{ca.IssuePEM(t, testpki.Leaf{Name: "client", URIs: []string{identity}}).KeyPair(t)},
				InsecureSkipVerify: true, //nolint:gosec // the server's check of the client is under test
			})))
		}
		_, err := grpctest.Call(context.Background(), dial(t, srv.Addr, opts...))
		return status.Code(err)
	}
	const (
		mine  = "spiffe://cluster.local/ns/front/sa/web"
		other = "spiffe://other.td/ns/front/sa/web"
	)
	await := func(desc string, want map[string]codes.Code) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			got := map[string]codes.Code{}
			for id := range want {
				got[id] = as(id)
			}
			if equalCodes(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: RPCs by identity %v, want %v", desc, got, want)
			}
			time.Sleep(20 * time.Millisecond) // polling
		}
	}
	await("no policy, no label: plaintext", map[string]codes.Code{"": codes.OK})

	strict := &model.PeerAuthentication{Namespace: "apps", Name: "echo", Selector: model.Labels{"app": "echo"}, Mode: model.MTLSStrict}
	sec.Set("", []*model.PeerAuthentication{strict}, nil)
	ts.Push(securityChanged(strict.Keys()...))
	await("STRICT", map[string]codes.Code{"": codes.Unavailable, mine: codes.OK, other: codes.PermissionDenied})

	settings := *model.DefaultMeshSettings()
	settings.TrustDomainAliases = []string{"other.td"}
	mesh.Set(&settings)
	ts.Push(pushOf(model.Event{Kind: model.ConfigChanged, Config: model.MeshTrustDomainKey}))
	await("STRICT, other.td an alias", map[string]codes.Code{mine: codes.OK, other: codes.OK})
	if n := ts.NACKs(); n != 0 {
		t.Fatalf("%d NACKs:\n%s", n, ts.logs.String())
	}
}

func equalCodes(a, b map[string]codes.Code) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
