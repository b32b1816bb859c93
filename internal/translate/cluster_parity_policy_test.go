package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpoptions "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// TestConnectionPoolAsIstiod: Envoy clusters get istiod's circuit
// breaker defaults (every threshold at the maximum) and connect timeout
// with or without a rule, and connectionPool's fields as istiod's
// cluster builder applies them; gRPC clients get http2MaxRequests alone,
// and nothing without it, as from istiod's grpcgen.
func TestConnectionPoolAsIstiod(t *testing.T) {
	const max = math.MaxUint32
	for _, tc := range []struct {
		desc     string
		protocol model.Protocol
		pool     *model.ConnectionPool
		// Envoy: thresholds (connections, pending, requests, retries),
		// connect timeout, HTTP options as JSON ("" none), keepalive.
		thresholds [4]uint32
		timeout    time.Duration
		http       string
		keepalive  string
		// grpcMax is the gRPC client's max_requests; 0: no circuit breaker.
		grpcMax uint32
	}{
		{desc: "no rule", protocol: model.HTTP, thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second},
		{desc: "a gRPC port keeps HTTP/2", protocol: model.GRPC, thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"explicitHttpConfig":{"http2ProtocolOptions":{}}}`},
		{desc: "limits", protocol: model.HTTP,
			pool:       &model.ConnectionPool{MaxConnections: 1, MaxPendingRequests: 2, MaxRequests: 3, MaxRetries: 4, ConnectTimeout: time.Second},
			thresholds: [4]uint32{1, 2, 3, 4}, timeout: time.Second, grpcMax: 3},
		{desc: "HTTP options; http's idle timeout over tcp's", protocol: model.HTTP,
			pool: &model.ConnectionPool{HTTPIdleTimeout: time.Minute, TCPIdleTimeout: time.Hour, MaxRequestsPerConnection: 5,
				MaxConnectionDuration: 2 * time.Minute},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"commonHttpProtocolOptions":{"idleTimeout":"60s","maxConnectionDuration":"120s","maxRequestsPerConnection":5},"explicitHttpConfig":{"httpProtocolOptions":{}}}`},
		{desc: "tcp's idle timeout alone", protocol: model.TCP, pool: &model.ConnectionPool{TCPIdleTimeout: time.Hour},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"commonHttpProtocolOptions":{"idleTimeout":"3600s"},"explicitHttpConfig":{"httpProtocolOptions":{}}}`},
		{desc: "UPGRADE makes an HTTP port speak HTTP/2, with its stream limit", protocol: model.HTTP,
			pool:       &model.ConnectionPool{H2Upgrade: model.H2Upgrade, MaxConcurrentStreams: 7},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"explicitHttpConfig":{"http2ProtocolOptions":{"maxConcurrentStreams":7}}}`},
		{desc: "HTTP/2 PINGs", protocol: model.GRPC,
			pool:       &model.ConnectionPool{HTTP2KeepAlive: &model.HTTP2KeepAlive{Interval: time.Minute, Timeout: 5 * time.Second}},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"explicitHttpConfig":{"http2ProtocolOptions":{"connectionKeepalive":{"interval":"60s","timeout":"5s"}}}}`},
		{desc: "the stream limit needs HTTP/2", protocol: model.HTTP, pool: &model.ConnectionPool{MaxConcurrentStreams: 7},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second},
		{desc: "useClientProtocol, even on a gRPC port and with UPGRADE", protocol: model.GRPC,
			pool:       &model.ConnectionPool{UseClientProtocol: true, H2Upgrade: model.H2Upgrade},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			http: `{"useDownstreamProtocolConfig":{"httpProtocolOptions":{},"http2ProtocolOptions":{}}}`},
		{desc: "keepalive", protocol: model.HTTP, pool: &model.ConnectionPool{TCPKeepalive: &model.TCPKeepalive{Probes: 3, Time: time.Minute, Interval: 5 * time.Second}},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second,
			keepalive: `{"keepaliveProbes":3,"keepaliveTime":60,"keepaliveInterval":5}`},
		{desc: "an empty keepalive turns SO_KEEPALIVE on", protocol: model.HTTP, pool: &model.ConnectionPool{TCPKeepalive: &model.TCPKeepalive{}},
			thresholds: [4]uint32{max, max, max, max}, timeout: 10 * time.Second, keepalive: `{}`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			svc := service("echo", "default", 8080)
			svc.Ports[0].Protocol = tc.protocol
			st := model.NewStore()
			st.Update(svc, nil)
			policies := &testPolicies{}
			policies.set()
			if tc.pool != nil {
				policies.set(&model.DestinationRule{Namespace: "default", Name: "echo", Host: svc.Hostname,
					Policy: &model.TrafficPolicy{ConnectionPool: tc.pool}})
			}
			m := generateWith(GeneratorOptions{Discovery: st, Policies: policies})
			name := model.ClusterName(8080, "", svc.Hostname)
			envoy, _ := m.get(t, resource.ClusterType, Client{Namespace: "default"}, name).(*cluster.Cluster)
			if err := Validate(envoy); err != nil {
				t.Fatal(err)
			}
			th := envoy.GetCircuitBreakers().GetThresholds()
			// No track_remaining: istiod turns those metrics off by default.
			if len(th) != 1 || th[0].GetTrackRemaining() {
				t.Fatalf("Envoy thresholds %v", th)
			}
			got := [4]uint32{th[0].GetMaxConnections().GetValue(), th[0].GetMaxPendingRequests().GetValue(),
				th[0].GetMaxRequests().GetValue(), th[0].GetMaxRetries().GetValue()}
			if got != tc.thresholds {
				t.Errorf("Envoy thresholds %v, want %v", got, tc.thresholds)
			}
			if d := envoy.GetConnectTimeout().AsDuration(); d != tc.timeout {
				t.Errorf("connect_timeout %v, want %v", d, tc.timeout)
			}
			var http string
			if a := envoy.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; a != nil {
				opts := &httpoptions.HttpProtocolOptions{}
				if err := a.UnmarshalTo(opts); err != nil {
					t.Fatal(err)
				}
				http = compactJSON(t, opts)
			}
			if http != tc.http {
				t.Errorf("HTTP options %s, want %s", http, tc.http)
			}
			var keepalive string
			if k := envoy.GetUpstreamConnectionOptions().GetTcpKeepalive(); k != nil {
				keepalive = compactJSON(t, k)
			}
			if keepalive != tc.keepalive {
				t.Errorf("keepalive %s, want %s", keepalive, tc.keepalive)
			}

			grpc, _ := m.get(t, resource.ClusterType, Client{Namespace: "default", GRPC: true}, name).(*cluster.Cluster)
			if grpc.GetConnectTimeout() != nil || grpc.GetUpstreamConnectionOptions() != nil {
				t.Errorf("a gRPC client got Envoy's connection options: %v", grpc)
			}
			switch cb := grpc.GetCircuitBreakers(); {
			case tc.grpcMax == 0 && cb != nil:
				t.Errorf("a gRPC client got a circuit breaker: %v", cb)
			case tc.grpcMax != 0 && (len(cb.GetThresholds()) != 1 || cb.GetThresholds()[0].GetMaxRequests().GetValue() != tc.grpcMax ||
				cb.GetThresholds()[0].GetMaxConnections() != nil):
				t.Errorf("a gRPC client got %v, want max_requests %d alone", cb, tc.grpcMax)
			}
		})
	}
}

func compactJSON(t *testing.T, m proto.Message) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestRuleLocalityLB: a rule's localityLbSetting (for the cluster's port
// and subset, as the policy merges) replaces the mesh's, enabled: false
// included, and comes before the service's trafficDistribution, as
// istiod's GetEffectiveLbSetting orders them; gRPC clients get it as
// Envoy does.
func TestRuleLocalityLB(t *testing.T) {
	eject := &model.OutlierDetection{Interval: time.Second}
	failoverTo := func(from, to string) *model.LocalityLB {
		return &model.LocalityLB{Failover: []model.LocalityFailover{{From: from, To: to}}}
	}
	const (
		flat       = "0:r1:10.0.0.1;0:r2:10.0.1.1;0:r3:10.0.2.1"
		meshOrder  = "0:r1:10.0.0.1;1:r3:10.0.2.1;2:r2:10.0.1.1" // the mesh fails r1 over to r3
		ruleOrder  = "0:r1:10.0.0.1;1:r2:10.0.1.1;2:r3:10.0.2.1" // the rule fails r1 over to r2
		byDistance = "0:r1:10.0.0.1;1:r2:10.0.1.1;1:r3:10.0.2.1"
	)
	for _, tc := range []struct {
		desc   string
		policy *model.TrafficPolicy
		subset string
		dist   model.TrafficDistribution
		want   string
	}{
		{desc: "no setting in the rule: the mesh's", policy: &model.TrafficPolicy{OutlierDetection: eject}, want: meshOrder},
		{desc: "the rule's replaces the mesh's", policy: &model.TrafficPolicy{OutlierDetection: eject, LocalityLB: failoverTo("r1", "r2")}, want: ruleOrder},
		{desc: "the rule's without failover entries: by distance alone",
			policy: &model.TrafficPolicy{OutlierDetection: eject, LocalityLB: &model.LocalityLB{}}, want: byDistance},
		{desc: "enabled: false in the rule", policy: &model.TrafficPolicy{OutlierDetection: eject, LocalityLB: &model.LocalityLB{Disabled: true}}, want: flat},
		{desc: "the rule's still needs outlier detection to fail over", policy: &model.TrafficPolicy{LocalityLB: failoverTo("r1", "r2")}, want: flat},
		{desc: "a port's settings without a loadBalancer: the mesh's, not the rule's top level", policy: &model.TrafficPolicy{LocalityLB: failoverTo("r1", "r2"),
			PortLevel: map[int32]*model.TrafficPolicy{80: {OutlierDetection: eject}}}, want: meshOrder},
		{desc: "the rule's comes before trafficDistribution", dist: model.PreferSameZone,
			policy: &model.TrafficPolicy{OutlierDetection: eject, LocalityLB: &model.LocalityLB{Disabled: true}}, want: flat},
		{desc: "a subset's", subset: "all", policy: &model.TrafficPolicy{OutlierDetection: eject}, want: ruleOrder},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := model.NewStore()
			svc := service("svc", "default", 80)
			svc.TrafficDistribution = tc.dist
			var list []*model.Endpoint
			for i, region := range []string{"r1", "r2", "r3"} {
				list = append(list, &model.Endpoint{Address: fmt.Sprintf("10.0.%d.1", i), Port: 80, ServicePortName: "grpc",
					Locality: model.Locality{Region: region, Zone: "z"}, Labels: model.Labels{"app": "svc"}})
			}
			st.Update(svc, list)
			mesh := &testMesh{}
			mesh.Set(&model.MeshSettings{TrustDomain: model.DefaultTrustDomain, LocalityLB: failoverTo("r1", "r3")})
			policies := &testPolicies{}
			policies.set(&model.DestinationRule{Namespace: "default", Name: "svc", Host: svc.Hostname, Policy: tc.policy,
				Subsets: []model.Subset{{Name: "all", Labels: model.Labels{"app": "svc"},
					Policy: &model.TrafficPolicy{LocalityLB: failoverTo("r1", "r2")}}}})
			m := generateWith(GeneratorOptions{Discovery: st, Mesh: mesh, Policies: policies})
			for _, grpc := range []bool{true, false} {
				c := Client{Namespace: "default", GRPC: grpc, Locality: model.Locality{Region: "r1", Zone: "z"}}
				cla := m.endpoints(t, c, model.ClusterName(80, tc.subset, svc.Hostname))
				if err := Validate(cla); err != nil {
					t.Fatal(err)
				}
				got := describeLocalities(cla, func(l *endpoint.LocalityLbEndpoints, addrs string) string {
					return fmt.Sprintf("%d:%s:%s", l.GetPriority(), l.GetLocality().GetRegion(), addrs)
				})
				if got != tc.want {
					t.Errorf("gRPC %v: got  %s\nwant %s", grpc, got, tc.want)
				}
			}
		})
	}
}
