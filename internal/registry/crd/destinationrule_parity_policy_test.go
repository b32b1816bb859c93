package crd

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

func drFromYAML(t *testing.T, spec string) *networkingv1.DestinationRule {
	t.Helper()
	var dr networkingv1.DestinationRule
	if err := yaml.UnmarshalStrict([]byte("metadata: {namespace: ns, name: r}\nspec:\n"+spec), &dr); err != nil {
		t.Fatal(err)
	}
	return &dr
}

// TestConvertConnectionPool: every connectionPool field istiod applies to
// Envoy is converted; gRPC clients, which get http2MaxRequests alone,
// have the others reported; an HTTP/2 keepalive without a timeout, which
// Envoy would NACK, is refused.
func TestConvertConnectionPool(t *testing.T) {
	const path = "spec.trafficPolicy.connectionPool."
	got, status := ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 1, connectTimeout: 2s, maxConnectionDuration: 3s, idleTimeout: 4s, tcpKeepalive: {probes: 5, time: 6s, interval: 7s}}
      http: {http1MaxPendingRequests: 8, http2MaxRequests: 9, maxRequestsPerConnection: 10, maxRetries: 11, idleTimeout: 12s,
             maxConcurrentStreams: 13, h2UpgradePolicy: UPGRADE, useClientProtocol: true, http2KeepAlive: {interval: 14s, timeout: 15s}}
`), "cluster.local")
	if got == nil {
		t.Fatalf("refused: %+v", status.Refused)
	}
	want := &model.ConnectionPool{MaxConnections: 1, ConnectTimeout: 2 * time.Second, MaxConnectionDuration: 3 * time.Second,
		TCPIdleTimeout: 4 * time.Second, TCPKeepalive: &model.TCPKeepalive{Probes: 5, Time: 6 * time.Second, Interval: 7 * time.Second},
		MaxPendingRequests: 8, MaxRequests: 9, MaxRequestsPerConnection: 10, MaxRetries: 11, HTTPIdleTimeout: 12 * time.Second,
		MaxConcurrentStreams: 13, H2Upgrade: model.H2Upgrade, UseClientProtocol: true,
		HTTP2KeepAlive: &model.HTTP2KeepAlive{Interval: 14 * time.Second, Timeout: 15 * time.Second}}
	if !reflect.DeepEqual(got.Policy.ConnectionPool, want) {
		t.Errorf("got  %+v\nwant %+v", got.Policy.ConnectionPool, want)
	}
	var grpc []string
	for _, f := range status.IgnoredGRPC {
		grpc = append(grpc, f.Path)
	}
	wantGRPC := []string{"tcp.maxConnections", "tcp.connectTimeout", "tcp.maxConnectionDuration", "tcp.idleTimeout", "tcp.tcpKeepalive",
		"http.http1MaxPendingRequests", "http.maxRequestsPerConnection", "http.maxRetries", "http.idleTimeout",
		"http.maxConcurrentStreams", "http.h2UpgradePolicy", "http.useClientProtocol", "http.http2KeepAlive"}
	for i := range wantGRPC {
		wantGRPC[i] = path + wantGRPC[i]
	}
	if !slices.Equal(grpc, wantGRPC) || len(status.IgnoredEnvoy) != 0 {
		t.Errorf("ignored for gRPC %v, for Envoy %v; want %v, none", grpc, status.IgnoredEnvoy, wantGRPC)
	}

	got, status = ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    connectionPool: {http: {http2MaxRequests: 9}}
`), "cluster.local")
	if got == nil || !status.OK() || got.Policy.ConnectionPool.MaxRequests != 9 {
		t.Errorf("http2MaxRequests alone: %+v, %+v; want applied, nothing reported", got, status)
	}
	if got, status := ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    connectionPool: {http: {http2KeepAlive: {interval: 1s}}}
`), "cluster.local"); got != nil || status.Refused == nil || status.Refused.Path != path+"http.http2KeepAlive.timeout" {
		t.Errorf("a keepalive without a timeout: %+v, %+v; want refused", got, status)
	}
}

// TestConvertRuleLocalityLB: a rule's localityLbSetting, at the top level,
// a port's or a subset's, is converted as MeshConfig's is (enabled: false
// kept), an empty loadBalancer is still a block, and what Istio's
// validation refuses is refused with the field.
func TestConvertRuleLocalityLB(t *testing.T) {
	got, status := ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    loadBalancer:
      localityLbSetting: {enabled: false}
    portLevelSettings:
    - port: {number: 80}
      loadBalancer: {localityLbSetting: {failover: [{from: r1, to: r2}]}}
  subsets:
  - name: v1
    labels: {v: "1"}
    trafficPolicy: {loadBalancer: {}}
`), "cluster.local")
	if got == nil || !status.OK() {
		t.Fatalf("%+v, %+v", got, status)
	}
	if lb := got.Policy.LocalityLB; lb == nil || !lb.Disabled {
		t.Errorf("top level: %+v, want disabled", lb)
	}
	if lb := got.Policy.PortLevel[80].LocalityLB; lb == nil || !reflect.DeepEqual(lb.Failover, []model.LocalityFailover{{From: "r1", To: "r2"}}) {
		t.Errorf("port 80: %+v", lb)
	}
	if p := got.Subsets[0].Policy; !p.LoadBalancerSet || p.LocalityLB != nil {
		t.Errorf("subset: %+v, want an empty loadBalancer block", p)
	}
	got, status = ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    loadBalancer:
      localityLbSetting: {distribute: [{from: r1, to: {r1: 50}}]}
`), "cluster.local")
	if got != nil || status.Refused == nil || status.Refused.Path != "spec.trafficPolicy.loadBalancer.localityLbSetting" {
		t.Errorf("weights adding up to 50: %+v, %+v; want refused", got, status)
	}
}

// TestLoadBalancerFieldsNotGenerated: loadBalancer fields meshpilot does
// not generate are reported for both kinds of client, not dropped.
func TestLoadBalancerFieldsNotGenerated(t *testing.T) {
	got, status := ConvertDestinationRule(drFromYAML(t, `
  host: svc
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 10s}, warmupDurationSecs: 10s}
`), "cluster.local")
	if got == nil {
		t.Fatalf("refused: %+v", status.Refused)
	}
	paths := func(fs []configstatus.Field) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	want := []string{"spec.trafficPolicy.loadBalancer.warmup", "spec.trafficPolicy.loadBalancer.warmupDurationSecs"}
	if !slices.Equal(paths(status.IgnoredEnvoy), want) || !slices.Equal(paths(status.IgnoredGRPC), want) {
		t.Errorf("ignored for Envoy %v, for gRPC %v; want %v for both", paths(status.IgnoredEnvoy), paths(status.IgnoredGRPC), want)
	}
}
