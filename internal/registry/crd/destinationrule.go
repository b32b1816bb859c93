package crd

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/util/validation"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
)

// ruleHost resolves a rule's host as Istio does
// (ResolveShortnameToFQDN): a name without a dot is a service of the
// rule's namespace; any other name is taken as written. Wildcard hosts
// are not served by the rules that call it: false.
func ruleHost(host, namespace, domainSuffix string) (model.Hostname, bool) {
	if host == "" || strings.Contains(host, "*") {
		return "", false
	}
	if !strings.Contains(host, ".") {
		return model.ServiceHostname(host, namespace, domainSuffix), true
	}
	return model.Hostname(host), true
}

// destinationRuleHost resolves a DestinationRule's host: a wildcard
// ("*.example.com", "*") is taken as written, as Istio does, any other as
// ruleHost resolves it. A "*" anywhere but as the whole first label
// matches nothing: refused, with why.
func destinationRuleHost(host, namespace, domainSuffix string) (model.Hostname, string) {
	switch {
	case host == "":
		return "", "a rule needs a host"
	case host == "*" || strings.HasPrefix(host, "*.") && !strings.Contains(host[2:], "*"):
		return model.Hostname(host), ""
	case strings.Contains(host, "*"):
		return "", "a wildcard is allowed only as the whole first label (\"*.example.com\")"
	}
	h, _ := ruleHost(host, namespace, domainSuffix)
	return h, ""
}

// ConvertDestinationRule turns a DestinationRule into the model's view
// and says what became of it: the rule is nil when the status refuses it
// (with the field and reason); an applied one may list fields a kind of
// client does not get.
func ConvertDestinationRule(dr *networkingv1.DestinationRule, domainSuffix string) (*model.DestinationRule, configstatus.Status) {
	host, why := destinationRuleHost(dr.Spec.GetHost(), dr.Namespace, domainSuffix)
	if why != "" {
		return nil, configstatus.Refuse("spec.host", why)
	}
	c := &policyConverter{}
	out := &model.DestinationRule{
		Namespace: dr.Namespace,
		Name:      dr.Name,
		Host:      host,
		Policy:    c.trafficPolicy("spec.trafficPolicy", dr.Spec.GetTrafficPolicy()),
		ExportTo:  dr.Spec.GetExportTo(),
		Created:   dr.CreationTimestamp.Time,
	}
	seen := map[string]int{} // subset name -> index
	for i, s := range dr.Spec.GetSubsets() {
		path := fmt.Sprintf("spec.subsets[%d]", i)
		c.subset(path, s, seen, i)
		sub := model.Subset{Name: s.GetName(), Policy: c.trafficPolicy(path+".trafficPolicy", s.GetTrafficPolicy())}
		if len(s.GetLabels()) > 0 {
			sub.Labels = model.Labels(s.GetLabels())
		}
		out.Subsets = append(out.Subsets, sub)
	}
	if c.status.Refused != nil {
		return nil, c.status
	}
	return out, c.status
}

// badSubsetName says why a subset name cannot be used, or "". A subset
// name goes between the bars of a cluster name
// ("outbound|<port>|<subset>|<host>"), where a "|" would make the name
// designate another subset and host; Istio's validation asks for a DNS
// label (validateSubsetName), which rules that out.
func badSubsetName(name string) string {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Sprintf("subset name %q is not a DNS label: %s", name, strings.Join(msgs, "; "))
	}
	return ""
}

// policyConverter converts the traffic policies of one rule, collecting
// what becomes of their fields.
type policyConverter struct {
	status configstatus.Status
}

// subset refuses a subset that cannot work: without a name (nothing can
// name it), with a name that is no DNS label (badSubsetName), named as
// an earlier one (which one a route means is ambiguous), or without
// labels (it would select every endpoint of the host, which is the host
// itself: most likely labels left out).
func (c *policyConverter) subset(path string, s *apinetworking.Subset, seen map[string]int, i int) {
	switch prev, dup := seen[s.GetName()]; {
	case s.GetName() == "":
		c.status.RefuseAt(path+".name", "a subset needs a name")
	case badSubsetName(s.GetName()) != "":
		c.status.RefuseAt(path+".name", badSubsetName(s.GetName()))
	case dup:
		c.status.RefuseAt(path+".name", fmt.Sprintf("subset %q is defined twice (spec.subsets[%d])", s.GetName(), prev))
	case len(s.GetLabels()) == 0:
		c.status.RefuseAt(path+".labels", "a subset needs labels to select its endpoints")
	}
	seen[s.GetName()] = i
}

func (c *policyConverter) trafficPolicy(path string, p *apinetworking.TrafficPolicy) *model.TrafficPolicy {
	if p == nil {
		return nil
	}
	out := c.portPolicy(path, p)
	for i, pl := range p.GetPortLevelSettings() {
		port := int32(pl.GetPort().GetNumber())
		if port == 0 {
			continue
		}
		if out.PortLevel == nil {
			out.PortLevel = map[int32]*model.TrafficPolicy{}
		}
		out.PortLevel[port] = c.portPolicy(fmt.Sprintf("%s.portLevelSettings[%d]", path, i), pl)
	}
	return out
}

// portSettings is what a policy and its portLevelSettings share.
type portSettings interface {
	GetLoadBalancer() *apinetworking.LoadBalancerSettings
	GetConnectionPool() *apinetworking.ConnectionPoolSettings
	GetOutlierDetection() *apinetworking.OutlierDetection
	GetTls() *apinetworking.ClientTLSSettings
}

// portPolicy converts the fields a policy and its portLevelSettings
// share.
func (c *policyConverter) portPolicy(path string, p portSettings) *model.TrafficPolicy {
	lb := p.GetLoadBalancer()
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"warmup", lb.GetWarmup() != nil},
		{"warmupDurationSecs", lb.GetWarmupDurationSecs() != nil},
		{"zoneAwareLbSetting", lb.GetZoneAwareLbSetting() != nil},
	} {
		if f.set {
			c.status.IgnoreEnvoy(path+".loadBalancer."+f.name, "not generated yet")
			c.status.IgnoreGRPC(path+".loadBalancer."+f.name, "not generated yet; grpc-go has no slow start or zone-aware balancing")
		}
	}
	return &model.TrafficPolicy{
		LoadBalancer:     convertLB(lb),
		ConsistentHash:   c.consistentHash(path+".loadBalancer.consistentHash", lb.GetConsistentHash()),
		LocalityLB:       c.localityLB(path+".loadBalancer.localityLbSetting", lb.GetLocalityLbSetting()),
		LoadBalancerSet:  lb != nil,
		ConnectionPool:   c.connectionPool(path+".connectionPool", p.GetConnectionPool()),
		OutlierDetection: c.outlierDetection(path+".outlierDetection", p.GetOutlierDetection()),
		TLS:              c.tls(path+".tls", p.GetTls()),
	}
}

// localityLB converts loadBalancer.localityLbSetting, which replaces
// MeshConfig's for the clusters of the policy (enabled: false turns
// locality load balancing off for them), refusing what Istio's
// validation refuses.
func (c *policyConverter) localityLB(path string, s *apinetworking.LocalityLoadBalancerSetting) *model.LocalityLB {
	out, err := meshconfig.ConvertLocalityLB(s)
	if err != nil {
		c.status.RefuseAt(path, err.Error())
		return nil
	}
	return out
}

// grpcCircuitBreaker is why gRPC clients get only http2MaxRequests of a
// connection pool.
const grpcCircuitBreaker = "grpc-go's circuit breaking (gRFC A32) has max_requests only; istiod gives gRPC clients nothing else of connectionPool either"

// connectionPool converts connectionPool. Envoy gets what istiod's
// cluster builder applies (applyConnectionPool); gRPC clients get
// http2MaxRequests alone, as from istiod, and the other fields are
// reported for them.
func (c *policyConverter) connectionPool(path string, p *apinetworking.ConnectionPoolSettings) *model.ConnectionPool {
	if p == nil {
		return nil
	}
	tcp, h := p.GetTcp(), p.GetHttp()
	out := &model.ConnectionPool{
		MaxConnections:           tcp.GetMaxConnections(),
		ConnectTimeout:           tcp.GetConnectTimeout().AsDuration(),
		MaxConnectionDuration:    tcp.GetMaxConnectionDuration().AsDuration(),
		TCPIdleTimeout:           tcp.GetIdleTimeout().AsDuration(),
		MaxPendingRequests:       h.GetHttp1MaxPendingRequests(),
		MaxRequests:              h.GetHttp2MaxRequests(),
		MaxRequestsPerConnection: h.GetMaxRequestsPerConnection(),
		MaxRetries:               h.GetMaxRetries(),
		HTTPIdleTimeout:          h.GetIdleTimeout().AsDuration(),
		MaxConcurrentStreams:     h.GetMaxConcurrentStreams(),
		UseClientProtocol:        h.GetUseClientProtocol(),
	}
	if k := h.GetHttp2KeepAlive(); k != nil {
		out.HTTP2KeepAlive = &model.HTTP2KeepAlive{Interval: k.GetInterval().AsDuration(), Timeout: k.GetTimeout().AsDuration()}
		if out.HTTP2KeepAlive.Timeout < time.Millisecond {
			// Envoy NACKs the cluster: refused rather than sent broken.
			c.status.RefuseAt(path+".http.http2KeepAlive.timeout", "Envoy needs a timeout of at least 1ms for HTTP/2 keepalive")
			return nil
		}
	}
	if k := tcp.GetTcpKeepalive(); k != nil {
		out.TCPKeepalive = &model.TCPKeepalive{Probes: k.GetProbes(), Time: k.GetTime().AsDuration(), Interval: k.GetInterval().AsDuration()}
	}
	switch h.GetH2UpgradePolicy() {
	case apinetworking.ConnectionPoolSettings_HTTPSettings_UPGRADE:
		out.H2Upgrade = model.H2Upgrade
	case apinetworking.ConnectionPoolSettings_HTTPSettings_DO_NOT_UPGRADE:
		out.H2Upgrade = model.H2DoNotUpgrade
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"tcp.maxConnections", out.MaxConnections > 0},
		{"tcp.connectTimeout", tcp.GetConnectTimeout() != nil},
		{"tcp.maxConnectionDuration", tcp.GetMaxConnectionDuration() != nil},
		{"tcp.idleTimeout", tcp.GetIdleTimeout() != nil},
		{"tcp.tcpKeepalive", out.TCPKeepalive != nil},
		{"http.http1MaxPendingRequests", out.MaxPendingRequests > 0},
		{"http.maxRequestsPerConnection", out.MaxRequestsPerConnection > 0},
		{"http.maxRetries", out.MaxRetries > 0},
		{"http.idleTimeout", h.GetIdleTimeout() != nil},
		{"http.maxConcurrentStreams", out.MaxConcurrentStreams > 0},
		{"http.h2UpgradePolicy", out.H2Upgrade != model.H2UpgradeDefault},
		{"http.useClientProtocol", out.UseClientProtocol},
		{"http.http2KeepAlive", out.HTTP2KeepAlive != nil},
	} {
		if f.set {
			c.status.IgnoreGRPC(path+"."+f.name, grpcCircuitBreaker)
		}
	}
	return out
}

// convertLB maps loadBalancer.simple. LEAST_CONN is the deprecated name
// of LEAST_REQUEST; PASSTHROUGH and UNSPECIFIED keep the default.
func convertLB(lb *apinetworking.LoadBalancerSettings) model.LoadBalancer {
	switch lb.GetSimple() {
	case apinetworking.LoadBalancerSettings_ROUND_ROBIN:
		return model.LBRoundRobin
	case apinetworking.LoadBalancerSettings_LEAST_REQUEST, apinetworking.LoadBalancerSettings_LEAST_CONN:
		return model.LBLeastRequest
	case apinetworking.LoadBalancerSettings_RANDOM:
		return model.LBRandom
	}
	return model.LBDefault
}

// grpcNoHash is why gRPC clients do not get a consistent hash other than
// a ring hash on a header.
const grpcNoHash = "grpc-go hashes only request headers on a ring hash (it NACKs MAGLEV and ignores other hash policies): gRPC clients get round robin"

// consistentHash converts loadBalancer.consistentHash as Istio's cluster
// builder reads it: maglev, else a ring hash whose minimum size is
// ringHash.minimumRingSize, or without ringHash the deprecated
// minimumRingSize, else 1024. A hash without a key hashes nothing (every
// request gets a random endpoint): refused.
func (c *policyConverter) consistentHash(path string, h *apinetworking.LoadBalancerSettings_ConsistentHashLB) *model.ConsistentHash {
	if h == nil {
		return nil
	}
	out := &model.ConsistentHash{}
	switch {
	case h.GetMaglev() != nil:
		out.Maglev, out.MaglevTableSize = true, h.GetMaglev().GetTableSize()
		c.status.IgnoreGRPC(path+".maglev", grpcNoHash)
	case h.GetRingHash() != nil:
		out.MinimumRingSize = h.GetRingHash().GetMinimumRingSize()
	default:
		out.MinimumRingSize = h.GetMinimumRingSize() //nolint:staticcheck // deprecated, still honoured as Istio does
		if out.MinimumRingSize == 0 {
			out.MinimumRingSize = 1024
		}
	}
	switch k := h.GetHashKey().(type) {
	case *apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
		out.HeaderName = k.HttpHeaderName
	case *apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpCookie:
		out.Cookie = &model.HashCookie{Name: k.HttpCookie.GetName(), Path: k.HttpCookie.GetPath(), TTL: k.HttpCookie.GetTtl().AsDuration()}
		c.status.IgnoreGRPC(path+".httpCookie", grpcNoHash)
	case *apinetworking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp:
		out.SourceIP = k.UseSourceIp
		c.status.IgnoreGRPC(path+".useSourceIp", grpcNoHash)
	case *apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName:
		out.QueryParameter = k.HttpQueryParameterName
		c.status.IgnoreGRPC(path+".httpQueryParameterName", grpcNoHash)
	}
	if out.HeaderName == "" && (out.Cookie == nil || out.Cookie.Name == "") && !out.SourceIP && out.QueryParameter == "" {
		c.status.RefuseAt(path, "no hash key: set one of httpHeaderName, httpCookie.name, useSourceIp, httpQueryParameterName")
		return nil
	}
	return out
}

// Why gRPC clients do not get parts of outlierDetection.
const (
	grpcNoConsecutive = "grpc-go's outlier detection (gRFC A50) ejects by success rate or failure percentage, never by consecutive errors"
	grpcNoEjection    = "gRPC clients get outlier detection only with failurePercentageThreshold, the one algorithm of this rule grpc-go has"
)

// outlierDetection converts outlierDetection. Envoy gets it as Istio's
// cluster builder maps it (applyOutlierDetection), and
// failurePercentageThreshold, which istiod does not map yet, as Envoy's
// failure percentage ejection. grpc-go honours the failure percentage,
// interval, base ejection time and maximum ejection percent with the
// same meaning; the consecutive-error counts it has not.
func (c *policyConverter) outlierDetection(path string, o *apinetworking.OutlierDetection) *model.OutlierDetection {
	if o == nil {
		return nil
	}
	out := &model.OutlierDetection{
		Consecutive5xx:     optUint32(o.GetConsecutive_5XxErrors()),
		ConsecutiveGateway: optUint32(o.GetConsecutiveGatewayErrors()),
		SplitLocalOrigin:   o.GetSplitExternalLocalOriginErrors(),
		FailurePercentage:  optUint32(o.GetFailurePercentageThreshold()),
		Interval:           o.GetInterval().AsDuration(),
		BaseEjectionTime:   o.GetBaseEjectionTime().AsDuration(),
	}
	if out.SplitLocalOrigin && o.GetConsecutiveLocalOriginFailures().GetValue() > 0 {
		out.ConsecutiveLocalOrigin = optUint32(o.GetConsecutiveLocalOriginFailures())
	}
	if o.GetMaxEjectionPercent() > 0 {
		out.MaxEjectionPercent = uint32(o.GetMaxEjectionPercent())
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"consecutive5xxErrors", out.Consecutive5xx != nil},
		{"consecutiveGatewayErrors", out.ConsecutiveGateway != nil},
		{"splitExternalLocalOriginErrors", out.SplitLocalOrigin},
	} {
		if f.set {
			c.status.IgnoreGRPC(path+"."+f.name, grpcNoConsecutive)
		}
	}
	if out.FailurePercentage == nil {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"interval", o.GetInterval() != nil},
			{"baseEjectionTime", o.GetBaseEjectionTime() != nil},
			{"maxEjectionPercent", out.MaxEjectionPercent > 0},
		} {
			if f.set {
				c.status.IgnoreGRPC(path+"."+f.name, grpcNoEjection)
			}
		}
	}
	if o.GetMinHealthPercent() > 0 {
		c.status.IgnoreEnvoy(path+".minHealthPercent", "meshpilot sends endpoints that are not ready with their health, so Envoy's panic threshold stays 0, as istiod keeps it for services whose unready endpoints it sends")
		c.status.IgnoreGRPC(path+".minHealthPercent", "grpc-go has no panic threshold")
	}
	if len(o.GetOutlierDetectionHttpErrorCodes()) > 0 {
		c.status.IgnoreEnvoy(path+".outlierDetectionHttpErrorCodes", "not generated yet")
		c.status.IgnoreGRPC(path+".outlierDetectionHttpErrorCodes", "grpc-go counts failed RPCs, not HTTP status codes")
	}
	if o.GetConsecutiveErrors() != 0 { //nolint:staticcheck // deprecated: reported, as istiod ignores it
		why := "deprecated and ignored by istiod: use consecutive5xxErrors"
		c.status.IgnoreEnvoy(path+".consecutiveErrors", why)
		c.status.IgnoreGRPC(path+".consecutiveErrors", why)
	}
	return out
}

// optUint32 reads an optional count: nil when unset.
func optUint32(w *wrapperspb.UInt32Value) *uint32 {
	if w == nil {
		return nil
	}
	v := w.GetValue()
	return &v
}

// grpcFiles is why gRPC clients do not read a rule's certificate files.
const grpcFiles = "gRPC clients read certificates only from their bootstrap's certificate provider instances: the one credentialName names, else \"default\""

// tls converts tls. MUTUAL needs a client certificate, from
// credentialName or files, as Istio's validation requires.
//
// gRPC clients take every certificate from a certificate provider
// instance of their bootstrap (gRFC A29): meshpilot gives them the
// instance credentialName names, else "default" (what `meshpilot
// bootstrap --cert --key --ca-cert` writes), so the files, sni and
// insecureSkipVerify are theirs to ignore. Envoy gets the files through
// its agent's SDS, as istiod writes them; meshpilot serves no secrets,
// so credentialName is nothing to Envoy.
func (c *policyConverter) tls(path string, t *apinetworking.ClientTLSSettings) *model.ClientTLS {
	if t == nil {
		return nil
	}
	out := &model.ClientTLS{
		CredentialName:     t.GetCredentialName(),
		ClientCertificate:  t.GetClientCertificate(),
		PrivateKey:         t.GetPrivateKey(),
		CACertificates:     t.GetCaCertificates(),
		SubjectAltNames:    t.GetSubjectAltNames(),
		SNI:                t.GetSni(),
		InsecureSkipVerify: t.GetInsecureSkipVerify().GetValue(),
	}
	switch t.GetMode() {
	case apinetworking.ClientTLSSettings_DISABLE:
		return out
	case apinetworking.ClientTLSSettings_SIMPLE:
		out.Mode = model.TLSSimple
	case apinetworking.ClientTLSSettings_MUTUAL:
		out.Mode = model.TLSMutual
		if out.CredentialName == "" && (out.ClientCertificate == "" || out.PrivateKey == "") {
			c.status.RefuseAt(path, "MUTUAL needs credentialName, or clientCertificate and privateKey")
			return nil
		}
	case apinetworking.ClientTLSSettings_ISTIO_MUTUAL:
		out.Mode = model.TLSIstioMutual
		if len(out.SubjectAltNames) > 0 {
			c.status.IgnoreGRPC(path+".subjectAltNames", "as from istiod, gRPC clients verify an ISTIO_MUTUAL server against the service's accounts")
		}
		for _, f := range []struct{ name, value string }{
			{"credentialName", out.CredentialName}, {"clientCertificate", out.ClientCertificate},
			{"privateKey", out.PrivateKey}, {"caCertificates", out.CACertificates},
		} {
			if f.value != "" {
				c.status.RefuseAt(path+"."+f.name, "ISTIO_MUTUAL uses the mesh's certificates: "+f.name+" must be empty")
				return nil
			}
		}
		return out
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"clientCertificate", out.ClientCertificate != ""}, {"privateKey", out.PrivateKey != ""},
		{"caCertificates", out.CACertificates != ""},
	} {
		if f.set {
			c.status.IgnoreGRPC(path+"."+f.name, grpcFiles)
		}
	}
	if out.SNI != "" {
		c.status.IgnoreGRPC(path+".sni", "grpc-go sends the target's host name")
	}
	if out.InsecureSkipVerify {
		c.status.IgnoreGRPC(path+".insecureSkipVerify", "grpc-go always verifies the server against the instance's roots")
	}
	if out.CredentialName != "" {
		c.status.IgnoreEnvoy(path+".credentialName", "meshpilot serves no secrets (SDS): Envoy gets only the files")
	}
	return out
}
