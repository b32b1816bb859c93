package crd

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

func drWithPolicy(p *apinetworking.TrafficPolicy) *networkingv1.DestinationRule {
	return &networkingv1.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec:       apinetworking.DestinationRule{Host: "svc", TrafficPolicy: p},
	}
}

// TestConvertConsistentHash: loadBalancer.consistentHash as Istio's
// cluster builder reads it, what gRPC clients do not get, and a hash
// without a key refused with its field.
func TestConvertConsistentHash(t *testing.T) {
	type chlb = apinetworking.LoadBalancerSettings_ConsistentHashLB
	const path = "spec.trafficPolicy.loadBalancer.consistentHash"
	header := func(h *chlb) *chlb {
		h.HashKey = &apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "x-user"}
		return h
	}
	for _, tc := range []struct {
		desc       string
		in         *chlb
		want       *model.ConsistentHash
		wantStatus configstatus.Status
	}{
		{"a header, the default ring", header(&chlb{}), &model.ConsistentHash{HeaderName: "x-user", MinimumRingSize: 1024}, configstatus.Status{}},
		{"ringHash.minimumRingSize", header(&chlb{HashAlgorithm: &apinetworking.LoadBalancerSettings_ConsistentHashLB_RingHash_{
			RingHash: &apinetworking.LoadBalancerSettings_ConsistentHashLB_RingHash{MinimumRingSize: 4096}}}),
			&model.ConsistentHash{HeaderName: "x-user", MinimumRingSize: 4096}, configstatus.Status{}},
		{"ringHash without a size: the client's default", header(&chlb{HashAlgorithm: &apinetworking.LoadBalancerSettings_ConsistentHashLB_RingHash_{
			RingHash: &apinetworking.LoadBalancerSettings_ConsistentHashLB_RingHash{}}}),
			&model.ConsistentHash{HeaderName: "x-user"}, configstatus.Status{}},
		{"the deprecated minimumRingSize", header(&chlb{MinimumRingSize: 2048}), &model.ConsistentHash{HeaderName: "x-user", MinimumRingSize: 2048}, configstatus.Status{}},
		{"maglev", header(&chlb{HashAlgorithm: &apinetworking.LoadBalancerSettings_ConsistentHashLB_Maglev{
			Maglev: &apinetworking.LoadBalancerSettings_ConsistentHashLB_MagLev{TableSize: 65537}}}),
			&model.ConsistentHash{HeaderName: "x-user", Maglev: true, MaglevTableSize: 65537},
			configstatus.Status{IgnoredGRPC: []configstatus.Field{{Path: path + ".maglev", Why: grpcNoHash}}}},
		{"a cookie", &chlb{HashKey: &apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpCookie{
			HttpCookie: &apinetworking.LoadBalancerSettings_ConsistentHashLB_HTTPCookie{Name: "s", Path: "/", Ttl: durationpb.New(time.Minute)}}},
			&model.ConsistentHash{Cookie: &model.HashCookie{Name: "s", Path: "/", TTL: time.Minute}, MinimumRingSize: 1024},
			configstatus.Status{IgnoredGRPC: []configstatus.Field{{Path: path + ".httpCookie", Why: grpcNoHash}}}},
		{"the source IP", &chlb{HashKey: &apinetworking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true}},
			&model.ConsistentHash{SourceIP: true, MinimumRingSize: 1024},
			configstatus.Status{IgnoredGRPC: []configstatus.Field{{Path: path + ".useSourceIp", Why: grpcNoHash}}}},
		{"a query parameter", &chlb{HashKey: &apinetworking.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName{HttpQueryParameterName: "u"}},
			&model.ConsistentHash{QueryParameter: "u", MinimumRingSize: 1024},
			configstatus.Status{IgnoredGRPC: []configstatus.Field{{Path: path + ".httpQueryParameterName", Why: grpcNoHash}}}},
		{"no key", &chlb{}, nil, configstatus.Refuse(path, "no hash key: set one of httpHeaderName, httpCookie.name, useSourceIp, httpQueryParameterName")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, status := ConvertDestinationRule(drWithPolicy(&apinetworking.TrafficPolicy{LoadBalancer: &apinetworking.LoadBalancerSettings{
				LbPolicy: &apinetworking.LoadBalancerSettings_ConsistentHash{ConsistentHash: tc.in}}}), "")
			if !reflect.DeepEqual(status, tc.wantStatus) {
				t.Fatalf("status %+v, want %+v", status, tc.wantStatus)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("refused, yet converted: %+v", got)
				}
				return
			}
			if !reflect.DeepEqual(got.Policy.ConsistentHash, tc.want) {
				t.Errorf("got %+v, want %+v", got.Policy.ConsistentHash, tc.want)
			}
		})
	}
}

// TestConvertOutlierDetection: outlierDetection converted field by field,
// and what gRPC clients and Envoy do not get, by field path.
func TestConvertOutlierDetection(t *testing.T) {
	const path = "spec.trafficPolicy.outlierDetection"
	u32 := func(v uint32) *uint32 { return &v }
	for _, tc := range []struct {
		desc      string
		in        *apinetworking.OutlierDetection
		want      *model.OutlierDetection
		wantGRPC  []string
		wantEnvoy []string
	}{
		{"consecutive errors: nothing for gRPC",
			&apinetworking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(5), ConsecutiveGatewayErrors: wrapperspb.UInt32(0),
				Interval: durationpb.New(10 * time.Second), MaxEjectionPercent: 50},
			&model.OutlierDetection{Consecutive5xx: u32(5), ConsecutiveGateway: u32(0), Interval: 10 * time.Second, MaxEjectionPercent: 50},
			[]string{path + ".consecutive5xxErrors", path + ".consecutiveGatewayErrors", path + ".interval", path + ".maxEjectionPercent"}, nil},
		{"failure percentage: gRPC gets it with its timing",
			&apinetworking.OutlierDetection{FailurePercentageThreshold: wrapperspb.UInt32(50), BaseEjectionTime: durationpb.New(time.Minute)},
			&model.OutlierDetection{FailurePercentage: u32(50), BaseEjectionTime: time.Minute}, nil, nil},
		{"local origin errors",
			&apinetworking.OutlierDetection{SplitExternalLocalOriginErrors: true, ConsecutiveLocalOriginFailures: wrapperspb.UInt32(3), FailurePercentageThreshold: wrapperspb.UInt32(50)},
			&model.OutlierDetection{SplitLocalOrigin: true, ConsecutiveLocalOrigin: u32(3), FailurePercentage: u32(50)},
			[]string{path + ".splitExternalLocalOriginErrors"}, nil},
		{"minHealthPercent, error codes and the deprecated count are reported",
			&apinetworking.OutlierDetection{FailurePercentageThreshold: wrapperspb.UInt32(50), MinHealthPercent: 30,
				OutlierDetectionHttpErrorCodes: []uint32{500}, ConsecutiveErrors: 4},
			&model.OutlierDetection{FailurePercentage: u32(50)},
			[]string{path + ".minHealthPercent", path + ".outlierDetectionHttpErrorCodes", path + ".consecutiveErrors"},
			[]string{path + ".minHealthPercent", path + ".outlierDetectionHttpErrorCodes", path + ".consecutiveErrors"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, status := ConvertDestinationRule(drWithPolicy(&apinetworking.TrafficPolicy{OutlierDetection: tc.in}), "")
			if got == nil {
				t.Fatalf("refused: %+v", status.Refused)
			}
			if !reflect.DeepEqual(got.Policy.OutlierDetection, tc.want) {
				t.Errorf("got %+v, want %+v", got.Policy.OutlierDetection, tc.want)
			}
			if g, e := fieldPaths(status.IgnoredGRPC), fieldPaths(status.IgnoredEnvoy); !reflect.DeepEqual(g, tc.wantGRPC) || !reflect.DeepEqual(e, tc.wantEnvoy) {
				t.Errorf("ignored for gRPC %v, for Envoy %v; want %v, %v", g, e, tc.wantGRPC, tc.wantEnvoy)
			}
		})
	}
}

// TestConvertTLS: tls converted, MUTUAL without a client certificate and
// ISTIO_MUTUAL with certificates of its own refused, and what gRPC
// clients and Envoy do not get.
func TestConvertTLS(t *testing.T) {
	const path = "spec.trafficPolicy.tls"
	type ctls = apinetworking.ClientTLSSettings
	for _, tc := range []struct {
		desc      string
		in        *ctls
		want      *model.ClientTLS
		refused   string
		wantGRPC  []string
		wantEnvoy []string
	}{
		{"DISABLE", &ctls{}, &model.ClientTLS{Mode: model.TLSDisable}, "", nil, nil},
		{"ISTIO_MUTUAL", &ctls{Mode: apinetworking.ClientTLSSettings_ISTIO_MUTUAL, SubjectAltNames: []string{"spiffe://td/ns/a/sa/b"}},
			// gRPC clients verify the service's accounts, as istiod's.
			&model.ClientTLS{Mode: model.TLSIstioMutual, SubjectAltNames: []string{"spiffe://td/ns/a/sa/b"}}, "", []string{path + ".subjectAltNames"}, nil},
		{"ISTIO_MUTUAL with a CA of its own", &ctls{Mode: apinetworking.ClientTLSSettings_ISTIO_MUTUAL, CaCertificates: "/ca.pem"}, nil, path + ".caCertificates", nil, nil},
		{"SIMPLE with files", &ctls{Mode: apinetworking.ClientTLSSettings_SIMPLE, CaCertificates: "/ca.pem", Sni: "api.example.com"},
			&model.ClientTLS{Mode: model.TLSSimple, CACertificates: "/ca.pem", SNI: "api.example.com"}, "",
			[]string{path + ".caCertificates", path + ".sni"}, nil},
		{"MUTUAL by credentialName", &ctls{Mode: apinetworking.ClientTLSSettings_MUTUAL, CredentialName: "partner"},
			&model.ClientTLS{Mode: model.TLSMutual, CredentialName: "partner"}, "", nil, []string{path + ".credentialName"}},
		{"MUTUAL without a client certificate", &ctls{Mode: apinetworking.ClientTLSSettings_MUTUAL, CaCertificates: "/ca.pem"}, nil, path, nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, status := ConvertDestinationRule(drWithPolicy(&apinetworking.TrafficPolicy{Tls: tc.in}), "")
			if tc.refused != "" {
				if got != nil || status.Refused == nil || status.Refused.Path != tc.refused {
					t.Fatalf("got %v, status %+v; want refused at %s", got, status, tc.refused)
				}
				return
			}
			if got == nil {
				t.Fatalf("refused: %+v", status.Refused)
			}
			if !reflect.DeepEqual(got.Policy.TLS, tc.want) {
				t.Errorf("got %+v, want %+v", got.Policy.TLS, tc.want)
			}
			if g, e := fieldPaths(status.IgnoredGRPC), fieldPaths(status.IgnoredEnvoy); !reflect.DeepEqual(g, tc.wantGRPC) || !reflect.DeepEqual(e, tc.wantEnvoy) {
				t.Errorf("ignored for gRPC %v, for Envoy %v; want %v, %v", g, e, tc.wantGRPC, tc.wantEnvoy)
			}
		})
	}
}

func fieldPaths(fs []configstatus.Field) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestDestinationRuleHost(t *testing.T) {
	for _, tc := range []struct {
		host, ns string
		want     model.Hostname
		refused  bool
	}{
		{"reviews", "bookinfo", "reviews.bookinfo.svc.cluster.local", false},
		{"*.bookinfo.svc.cluster.local", "ns", "*.bookinfo.svc.cluster.local", false},
		{"*.example.com", "ns", "*.example.com", false},
		{"*", "ns", "*", false},
		{"reviews.*.svc.cluster.local", "ns", "", true},
		{"*example.com", "ns", "", true},
		{"*.*.com", "ns", "", true},
		{"", "ns", "", true},
	} {
		got, why := destinationRuleHost(tc.host, tc.ns, "")
		if got != tc.want || (why != "") != tc.refused {
			t.Errorf("destinationRuleHost(%q, %q) = %q, %q; want %q, refused %v", tc.host, tc.ns, got, why, tc.want, tc.refused)
		}
	}
}

// TestPoliciesWildcard: a rule for a wildcard host applies to the hosts it
// matches that have no rule of their own in its namespace, the most
// specific wildcard first, and its changes are reported under the
// wildcard's key, which every host it may match depends on.
func TestPoliciesWildcard(t *testing.T) {
	store := &ruleStore{rules: map[string]*networkingv1.DestinationRule{}}
	p := NewPolicies(store, PolicyOptions{RootNamespace: "istio-system"})
	var pushed []string
	p.AppendEventHandler(func(ev model.Event) { pushed = append(pushed, ev.Config.Name) })
	apply := func(name, host string) {
		if host == "" {
			delete(store.rules, "shop/"+name)
		} else {
			store.rules["shop/"+name] = &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
				Spec: apinetworking.DestinationRule{Host: host}}
		}
		pushed = nil
		store.handler(Event{Kind: DestinationRule, Namespace: "shop", Name: name})
	}
	chosen := func(h model.Hostname) string {
		r, _ := p.DestinationRuleFor(h, "shop", "shop")
		if r == nil {
			return ""
		}
		return r.Name
	}
	const cart, orders = model.Hostname("cart.shop.svc.cluster.local"), model.Hostname("orders.shop.svc.cluster.local")
	for _, step := range []struct {
		desc, name, host string
		wantPushed       string
		wantCart         string
		wantOrders       string
	}{
		{"a wildcard for the namespace", "ns-wide", "*.shop.svc.cluster.local", "*.shop.svc.cluster.local *", "ns-wide", "ns-wide"},
		{"a host's own rule wins over it", "cart", "cart", "cart.shop.svc.cluster.local", "cart", "ns-wide"},
		{"a wider wildcard loses to the narrower", "mesh", "*.cluster.local", "*.cluster.local *", "cart", "ns-wide"},
		{"the narrower goes: the wider applies", "ns-wide", "", "*.shop.svc.cluster.local *", "cart", "mesh"},
		{"a wildcard that exists changes: its key alone", "mesh", "*.cluster.local", "*.cluster.local", "cart", "mesh"},
	} {
		// What the readers of cart's and orders' rules depended on
		// before the step must hear of it.
		held := p.AppendDestinationRuleKeys(p.AppendDestinationRuleKeys(nil, cart), orders)
		apply(step.name, step.host)
		if strings.Join(pushed, " ") != step.wantPushed || !slices.ContainsFunc(held, func(k model.ConfigKey) bool { return slices.Contains(pushed, k.Name) }) {
			t.Fatalf("%s: pushed %v, want [%s], a key cart or orders depended on (%v)", step.desc, pushed, step.wantPushed, held)
		}
		if chosen(cart) != step.wantCart || chosen(orders) != step.wantOrders {
			t.Fatalf("%s: cart %q, orders %q; want %q, %q", step.desc, chosen(cart), chosen(orders), step.wantCart, step.wantOrders)
		}
	}
}
