package translate

import (
	"slices"
	"strconv"
	"strings"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// tlsTransportSocket is the transport socket name grpc-go requires of a
// TLS context (and Envoy's TLS transport socket).
const tlsTransportSocket = "envoy.transport_sockets.tls"

// The certificate names istiod gives gRPC clients and servers for the
// mesh's certificates: the workload's identity and its roots, both from
// the bootstrap's certificate provider instance "default". grpc-go's
// file_watcher plugin serves both whatever the name.
const (
	defaultProviderInstance = "default"
	identityCertificate     = "default"
	rootCertificate         = "ROOTCA"
)

// sdsCluster is the cluster through which an Envoy sidecar asks its
// agent (istio-agent) for certificates, as istiod configures it.
const sdsCluster = "sds-grpc"

// applyTLS secures a cluster as its rule's tls says (nil or DISABLE:
// plaintext), for a client of the given kind; it returns the keys it
// read and that the result varies by kind (gRPC clients and Envoy read
// certificates from different places).
//
// gRPC clients (gRFC A29; they honour it only when built with xDS
// credentials) get an UpstreamTlsContext whose certificates come from
// their bootstrap's certificate provider instances: ISTIO_MUTUAL the
// mesh's identity and roots from "default", verifying the destination's
// SPIFFE identities, as istiod's grpcgen does; SIMPLE the roots and
// MUTUAL also the identity of the instance named by credentialName, else
// "default", verifying subjectAltNames. Envoy gets what istiod gives a
// sidecar: SDS from its agent for the mesh's certificates (with Istio's
// ALPN and SNI) or for the rule's files ("file-cert:<cert>~<key>",
// "file-root:<ca>").
func (g *clusterGenerator) applyTLS(cl *cluster.Cluster, t *model.ClientTLS, c *Client, svc *model.Service, key model.ClusterKey, deps []model.ConfigKey) ([]model.ConfigKey, Vary) {
	if t == nil || t.Mode == model.TLSDisable {
		return deps, 0
	}
	sans := t.SubjectAltNames
	if t.Mode == model.TLSIstioMutual && (len(sans) == 0 || c.GRPC) {
		// istiod's grpcgen verifies a gRPC client's ISTIO_MUTUAL peer
		// against the service's accounts only, whatever the rule's
		// subjectAltNames (the conversion reports them for gRPC).
		// The identities of the endpoints, not the endpoints: endpoints
		// coming and going under the same service accounts leave the
		// cluster as it is.
		deps = append(deps, model.ServiceAccountsKey(svc.Hostname), model.MeshTrustDomainKey)
		sans = spiffeIdentities(g.Discovery, svc, g.MeshSettings())
	}
	var ctx *tls.UpstreamTlsContext
	if c.GRPC {
		ctx = &tls.UpstreamTlsContext{CommonTlsContext: grpcTLSContext(t, sans)}
	} else {
		ctx = envoyTLSContext(t, sans, svc, key)
	}
	cl.TransportSocket = transportSocket(ctx)
	return deps, VaryKind
}

// grpcTLSContext is a gRPC client's TLS context: the provider instance's
// roots, verifying sans when there are any, and its identity unless the
// mode is SIMPLE.
func grpcTLSContext(t *model.ClientTLS, sans []string) *tls.CommonTlsContext {
	instance := defaultProviderInstance
	if t.Mode != model.TLSIstioMutual && t.CredentialName != "" {
		instance = t.CredentialName
	}
	out := &tls.CommonTlsContext{
		ValidationContextType: &tls.CommonTlsContext_ValidationContext{ValidationContext: &tls.CertificateValidationContext{
			CaCertificateProviderInstance: &tls.CertificateProviderPluginInstance{InstanceName: instance, CertificateName: rootCertificate},
			MatchSubjectAltNames:          exactMatchers(sans),
		}},
	}
	if t.Mode != model.TLSSimple {
		out.TlsCertificateProviderInstance = &tls.CertificateProviderPluginInstance{InstanceName: instance, CertificateName: identityCertificate}
	}
	return out
}

// envoyTLSContext is an Envoy sidecar's TLS context, as istiod's cluster
// builder writes it.
//
// TLS 1.2 to 1.3, as istiod pins them: Envoy's own default for an
// upstream connection stops at TLS 1.2.
func envoyTLSContext(t *model.ClientTLS, sans []string, svc *model.Service, key model.ClusterKey) *tls.UpstreamTlsContext {
	common := &tls.CommonTlsContext{TlsParams: &tls.TlsParameters{
		TlsMinimumProtocolVersion: tls.TlsParameters_TLSv1_2,
		TlsMaximumProtocolVersion: tls.TlsParameters_TLSv1_3,
	}}
	out := &tls.UpstreamTlsContext{CommonTlsContext: common, Sni: t.SNI}
	var root string
	switch t.Mode {
	case model.TLSIstioMutual:
		common.TlsCertificateSdsSecretConfigs = []*tls.SdsSecretConfig{sdsSecret(identityCertificate)}
		root = rootCertificate
		common.AlpnProtocols = []string{"istio-peer-exchange", "istio"}
		if p, _ := svc.PortByNumber(key.Port); speaksHTTP2(p.Protocol) {
			common.AlpnProtocols = append(common.AlpnProtocols, "h2")
		}
		if out.Sni == "" {
			out.Sni = "outbound_." + strconv.Itoa(int(key.Port)) + "_." + key.Subset + "_." + string(key.Host)
		}
	default:
		if t.Mode == model.TLSMutual && t.ClientCertificate != "" {
			common.TlsCertificateSdsSecretConfigs = []*tls.SdsSecretConfig{sdsSecret("file-cert:" + t.ClientCertificate + "~" + t.PrivateKey)}
		}
		if t.CACertificates != "" && !t.InsecureSkipVerify {
			root = "file-root:" + t.CACertificates
		}
	}
	if root != "" {
		common.ValidationContextType = &tls.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tls.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tls.CertificateValidationContext{MatchSubjectAltNames: exactMatchers(sans)},
				ValidationContextSdsSecretConfig: sdsSecret(root),
			},
		}
	}
	return out
}

// sdsSecret asks the sidecar's agent for a secret, as istiod does.
func sdsSecret(name string) *tls.SdsSecretConfig {
	return &tls.SdsSecretConfig{Name: name, SdsConfig: &core.ConfigSource{
		ResourceApiVersion: core.ApiVersion_V3,
		ConfigSourceSpecifier: &core.ConfigSource_ApiConfigSource{ApiConfigSource: &core.ApiConfigSource{
			ApiType:                   core.ApiConfigSource_GRPC,
			TransportApiVersion:       core.ApiVersion_V3,
			SetNodeOnFirstMessageOnly: true,
			GrpcServices: []*core.GrpcService{{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: sdsCluster},
			}}},
		}},
	}}
}

// serverTLSContext is a gRPC server's TLS context under mutual TLS, as
// istiod's grpcgen writes it: the mesh's identity and roots from the
// bootstrap's "default" instance, a client certificate required.
// grpc-go refuses match_subject_alt_names on servers.
func serverTLSContext() *tls.DownstreamTlsContext {
	return &tls.DownstreamTlsContext{
		CommonTlsContext:         grpcTLSContext(&model.ClientTLS{Mode: model.TLSIstioMutual}, nil),
		RequireClientCertificate: wrapperspb.Bool(true),
	}
}

func transportSocket(m proto.Message) *core.TransportSocket {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // marshalling a well-formed message cannot fail
	}
	return &core.TransportSocket{Name: tlsTransportSocket, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: a}}
}

// spiffeIdentities are the identities the endpoints of a service may
// present, as istiod lists a service's accounts:
// spiffe://<trust domain>/ns/<namespace>/sa/<service account> for each
// service account among its endpoints, in the mesh's trust domain then
// in each alias; then the service's own (a Service's canonical service
// accounts, a ServiceEntry's subjectAltNames) as written, a SPIFFE one
// also in each alias.
func spiffeIdentities(d model.ServiceDiscovery, svc *model.Service, mesh *model.MeshSettings) []string {
	var accounts []string
	for _, p := range svc.PortsByNumber() {
		for _, ep := range model.EndpointsOf(d, svc, p.Port, nil) {
			if ep.ServiceAccount == "" {
				continue
			}
			ns := ep.Namespace
			if ns == "" {
				ns = svc.Namespace
			}
			accounts = append(accounts, "/ns/"+ns+"/sa/"+ep.ServiceAccount)
		}
	}
	slices.Sort(accounts)
	accounts = slices.Compact(accounts)
	domains := append([]string{mesh.TrustDomain}, mesh.TrustDomainAliases...)
	var out []string
	for _, td := range domains {
		for _, a := range accounts {
			out = append(out, "spiffe://"+td+a)
		}
	}
	var own []string
	for _, id := range svc.ServiceAccounts {
		own = append(own, id)
		if rest, ok := strings.CutPrefix(id, "spiffe://"); ok {
			if _, path, ok := strings.Cut(rest, "/"); ok {
				for _, td := range mesh.TrustDomainAliases {
					own = append(own, "spiffe://"+td+"/"+path)
				}
			}
		}
	}
	slices.Sort(own)
	for _, id := range slices.Compact(own) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func exactMatchers(values []string) []*matcher.StringMatcher {
	var out []*matcher.StringMatcher
	for _, v := range values {
		out = append(out, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: strings.TrimSpace(v)}})
	}
	return out
}
