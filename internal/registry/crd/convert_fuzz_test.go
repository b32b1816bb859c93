package crd

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/configstatus/statustest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// FuzzConvertRules decodes a spec as the informers do (Istio's own JSON
// decoding, which takes unknown fields and quoted numbers) into a
// DestinationRule and into a VirtualService of a namespace, and converts
// each. Whatever the bytes: nothing panics; the verdict is the same every
// time (a relist would otherwise report a change); a refused object is nil
// and its status names a field of the spec and why; an applied rule has a
// host and uniquely named subsets whose cluster names read back as
// written; an applied VirtualService routes to ports a cluster name can
// carry, with weights that are shares of 100.
func FuzzConvertRules(f *testing.F) {
	for _, s := range fuzzRuleSeeds {
		f.Add("ns", []byte(s))
	}
	f.Add("", []byte(`{"host":"reviews"}`))
	f.Add("a.b", []byte(`{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews"}}]}]}`))
	f.Fuzz(func(t *testing.T, namespace string, spec []byte) {
		meta := metav1.ObjectMeta{Namespace: namespace, Name: "fuzzed"}
		dr := &networkingv1.DestinationRule{ObjectMeta: meta}
		if err := dr.Spec.UnmarshalJSON(spec); err == nil {
			rule, st := ConvertDestinationRule(dr, "")
			_, again := ConvertDestinationRule(dr, "")
			checkConversion(t, rule != nil, st, again)
			if rule != nil {
				checkRule(t, rule)
			}
		}
		vs := &networkingv1.VirtualService{ObjectMeta: meta}
		if err := vs.Spec.UnmarshalJSON(spec); err == nil {
			opts := ConvertOptions{SubsetDefined: func(_ model.Hostname, subset string) bool { return subset != "undefined" }}
			routes, st := ConvertVirtualService(vs, opts)
			_, again := ConvertVirtualService(vs, opts)
			checkConversion(t, routes != nil, st, again)
			if routes != nil {
				checkVirtualService(t, routes)
			}
		}
	})
}

// fuzzRuleSeeds are specs of DestinationRules and VirtualServices as
// Istio's documentation and our tests write them.
var fuzzRuleSeeds = []string{
	`{"host":"reviews","trafficPolicy":{"loadBalancer":{"simple":"LEAST_REQUEST"},"connectionPool":{"http":{"http2MaxRequests":100}},
	  "outlierDetection":{"consecutive5xxErrors":3,"interval":"10s","baseEjectionTime":"30s","maxEjectionPercent":50,"minHealthPercent":10},
	  "portLevelSettings":[{"port":{"number":9080},"loadBalancer":{"simple":"RANDOM"}}]},
	  "subsets":[{"name":"v1","labels":{"version":"v1"}},{"name":"v2","labels":{"version":"v2"},"trafficPolicy":{"loadBalancer":{"simple":"ROUND_ROBIN"}}}],
	  "exportTo":["."]}`,
	`{"host":"*.example.com","trafficPolicy":{"loadBalancer":{"consistentHash":{"httpHeaderName":"x-user","minimumRingSize":"1024"}}}}`,
	`{"host":"reviews.ns.svc.cluster.local","trafficPolicy":{"loadBalancer":{"consistentHash":{"ringHash":{"minimumRingSize":"64"},"httpCookie":{"name":"u","ttl":"10s"}}},
	  "tls":{"mode":"ISTIO_MUTUAL"}}}`,
	`{"host":"db","trafficPolicy":{"tls":{"mode":"MUTUAL","clientCertificate":"/c.pem","privateKey":"/k.pem","caCertificates":"/ca.pem","sni":"db","insecureSkipVerify":true}}}`,
	`{"host":"a*b","subsets":[{"name":""},{"name":"v1"},{"name":"v1","labels":{"a":"b"}}]}`,
	`{"host":"reviews","trafficPolicy":{"loadBalancer":{"consistentHash":{}}},"subsets":[{"name":"v|1","labels":{"version":"v1"}}]}`,
	`{"hosts":["reviews","reviews.ns.svc.cluster.local","*.example.com"],"gateways":["mesh","istio-system/ingress"],"exportTo":["."],
	  "http":[{"name":"canary","match":[{"uri":{"prefix":"/pkg.Reviews/"},"headers":{"x-canary":{"exact":"yes"}}}],
	  "route":[{"destination":{"host":"reviews","subset":"v2","port":{"number":9080}},"weight":20},{"destination":{"host":"reviews","subset":"v1"},"weight":80}],
	  "timeout":"1.5s","retries":{"attempts":3,"perTryTimeout":"500ms","retryOn":"unavailable,5xx"}},
	  {"route":[{"destination":{"host":"reviews"}}],"fault":{"delay":{"fixedDelay":"1s","percentage":{"value":10}},"abort":{"grpcStatus":"UNAVAILABLE","percentage":{"value":5}}}}]}`,
	`{"hosts":["reviews"],"http":[{"match":[{"uri":{"regex":"(a"}},{"queryParams":{"q":{"exact":"1"}},"withoutHeaders":{"h":{}}}],
	  "redirect":{"uri":"/x"},"rewrite":{"uriRegexRewrite":{"match":"[","rewrite":"y"}},"mirror":{"host":"ratings"},"mirrorPercentage":{"value":50},
	  "corsPolicy":{"allowOrigins":[{"exact":"*"}]},"headers":{"request":{"set":{"a":"b"}}}}]}`,
	`{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews","port":{"number":70000}},"weight":50},{"destination":{"host":"a","subset":"undefined"},"weight":-1}]},
	  {"directResponse":{"status":503}},{"delegate":{"name":"x"}},{"route":[]},{"fault":{"abort":{"httpStatus":700}},"route":[{"destination":{"host":"*"}}]}],
	  "tcp":[{"route":[{"destination":{"host":"db"}}]}],"tls":[{"match":[{"sniHosts":["x"]}]}]}`,
	`{"hosts":["reviews"],"http":[{"timeout":"-1s","retries":{"attempts":-1,"retryOn":"x"},"route":[{"destination":{"host":"reviews","port":{"number":4294967295}}}]}]}`,
}

// checkConversion: a conversion says the same twice, and what any
// conversion's status must say (statustest.Check).
func checkConversion(t *testing.T, converted bool, st, again configstatus.Status) {
	t.Helper()
	if !st.Equal(again) {
		t.Fatalf("two conversions disagree: %+v then %+v", st, again)
	}
	statustest.Check(t, st, converted)
}

func checkRule(t *testing.T, r *model.DestinationRule) {
	t.Helper()
	if r.Host == "" {
		t.Fatal("an applied rule without a host")
	}
	seen := map[string]bool{}
	for _, s := range r.Subsets {
		if s.Name == "" || seen[s.Name] {
			t.Fatalf("subset %q: empty or twice", s.Name)
		}
		seen[s.Name] = true
		checkClusterName(t, 80, s.Name, r.Host)
	}
}

func checkVirtualService(t *testing.T, vs *model.VirtualService) {
	t.Helper()
	for i, r := range vs.HTTP {
		total := int64(0)
		for j, d := range r.Route {
			if d.Weight < 0 || d.Weight > 100 {
				t.Fatalf("http[%d].route[%d]: weight %d", i, j, d.Weight)
			}
			total += int64(d.Weight)
			checkDestination(t, d)
		}
		if len(r.Route) > 0 && total != 100 {
			t.Fatalf("http[%d]: weights add up to %d", i, total)
		}
		for _, m := range r.Mirror {
			checkDestination(t, m.Destination)
		}
	}
}

// checkDestination: the cluster a destination names is one a client can
// ask for (port 0 stands for the host's only port).
func checkDestination(t *testing.T, d model.RouteDestination) {
	t.Helper()
	port := d.Port
	if port == 0 {
		port = 80
	}
	checkClusterName(t, port, d.Subset, d.Host)
}

func checkClusterName(t *testing.T, port int32, subset string, host model.Hostname) {
	t.Helper()
	name := model.ClusterName(port, subset, host)
	want := model.ClusterKey{Port: port, Subset: subset, Host: host}
	if got, ok := model.ParseClusterName(name); !ok || got != want {
		t.Fatalf("%s: the cluster %q reads as %+v, %v", fmt.Sprint(want), name, got, ok)
	}
}
