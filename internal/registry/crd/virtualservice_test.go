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

// vsFromYAML reads a VirtualService of namespace ns from its spec.
func vsFromYAML(t *testing.T, name, spec string) *networkingv1.VirtualService {
	t.Helper()
	var vs networkingv1.VirtualService
	if err := yaml.UnmarshalStrict([]byte("metadata: {namespace: ns, name: "+name+"}\nspec:\n"+spec), &vs); err != nil {
		t.Fatal(err)
	}
	return &vs
}

// definedSubsets: reviews has v1 and v2.
func definedSubsets(h model.Hostname, subset string) bool {
	return h == "reviews.ns.svc.cluster.local" && (subset == "v1" || subset == "v2")
}

func TestConvertVirtualService(t *testing.T) {
	vs := vsFromYAML(t, "reviews", `
  hosts: [reviews, reviews.ns.svc.cluster.local, "*.example.com"]
  gateways: [mesh, istio-system/ingress]
  exportTo: ["."]
  http:
  - name: canary
    match:
    - uri: {prefix: /pkg.Reviews/}
      headers:
        X-User: {exact: tester}
        x-any: {}
        x-re: {regex: "v[0-9]+"}
      port: 9080
    - uri: {exact: /pkg.Reviews/Get}
      ignoreUriCase: true
    - gateways: [istio-system/ingress]
    route:
    - destination: {host: reviews, subset: v1}
      weight: 80
    - destination: {host: reviews, subset: v2, port: {number: 9090}}
      weight: 20
    timeout: 2s
    retries: {attempts: 3, retryOn: "unavailable,503", perTryTimeout: 1s}
    fault:
      delay: {fixedDelay: 100ms, percentage: {value: 12.5}}
      abort: {grpcStatus: UNAVAILABLE, percentage: {value: 5}}
  - route:
    - destination: {host: ratings.other.svc.cluster.local}
    retries: {attempts: 0}
`)
	got, st := ConvertVirtualService(vs, ConvertOptions{SubsetDefined: definedSubsets})
	host := model.Hostname("reviews.ns.svc.cluster.local")
	want := &model.VirtualService{
		Namespace: "ns", Name: "reviews", Hosts: []model.Hostname{host}, ExportTo: []string{"."},
		HTTP: []model.HTTPRoute{{
			Name: "canary",
			Match: []model.HTTPMatch{
				{URI: &model.StringMatch{Kind: model.MatchPrefix, Value: "/pkg.Reviews/"}, Port: 9080, Headers: []model.HeaderMatch{
					{Name: "x-user", StringMatch: model.StringMatch{Kind: model.MatchExact, Value: "tester"}},
					{Name: "x-any", StringMatch: model.StringMatch{Kind: model.MatchPresent}},
					{Name: "x-re", StringMatch: model.StringMatch{Kind: model.MatchRegex, Value: "v[0-9]+"}},
				}},
				{URI: &model.StringMatch{Kind: model.MatchExact, Value: "/pkg.Reviews/Get"}, IgnoreURICase: true},
			},
			Route: []model.RouteDestination{
				{Host: host, Subset: "v1", Weight: 80},
				{Host: host, Subset: "v2", Port: 9090, Weight: 20},
			},
			Timeout: 2 * time.Second,
			Retries: &model.HTTPRetry{Attempts: 3, RetryOn: "unavailable,503", PerTryTimeout: time.Second},
			Fault: &model.HTTPFault{
				Delay: &model.FaultDelay{Fixed: 100 * time.Millisecond, Percent: 12.5},
				Abort: &model.FaultAbort{GRPC: true, Code: 14, Percent: 5},
			},
		}, {
			Route:   []model.RouteDestination{{Host: "ratings.other.svc.cluster.local", Weight: 100}},
			Retries: &model.HTTPRetry{},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	wantStatus := configstatus.Status{
		IgnoredGRPC: []configstatus.Field{
			{Path: "spec.gateways[1]", Why: whyGatewayOnly},
			{Path: "spec.hosts[2]", Why: "wildcard hosts are not served yet"},
			{Path: "spec.http[0].match[2].gateways", Why: whyGatewayOnly + ": the match is left out"},
			{Path: "spec.http[0].retries.retryOn", Why: "grpc-go retries only on gRPC status names (cancelled, deadline-exceeded, internal, resource-exhausted, unavailable); for Envoy only: 503"},
			{Path: "spec.http[0].retries.perTryTimeout", Why: whyNoPerTry},
		},
		IgnoredEnvoy: []configstatus.Field{
			{Path: "spec.gateways[1]", Why: whyGatewayOnly},
			{Path: "spec.hosts[2]", Why: "wildcard hosts are not served yet"},
			{Path: "spec.http[0].match[2].gateways", Why: whyGatewayOnly + ": the match is left out"},
		},
	}
	if !reflect.DeepEqual(st, wantStatus) {
		t.Errorf("status %+v\nwant   %+v", st, wantStatus)
	}
}

// TestVirtualServiceRules: what is refused (with the field) and what is
// ignored, for which kind of client.
func TestVirtualServiceRules(t *testing.T) {
	const to = "\n    route: [{destination: {host: reviews}}]"
	for _, tc := range []struct {
		name, spec   string
		refused      string   // field path; "" applied
		applies      bool     // the mesh gets a VirtualService
		grpcIgnored  []string // paths
		envoyIgnored []string
	}{
		{name: "plain", spec: "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]", applies: true},
		{name: "a lone destination of weight 100", spec: "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}, weight: 100}]", applies: true},
		{name: "weights of several destinations all 0", refused: "spec.http[0].route", spec: `  hosts: [reviews]
  http:
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 0}
    - {destination: {host: reviews, subset: v2}}`},
		{name: "unknown subset", refused: "spec.http[0].route[0].destination.subset", spec: "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews, subset: v3}}]"},
		{name: "subset of a host without rule", refused: "spec.http[0].route[0].destination.subset", spec: "  hosts: [reviews]\n  http:\n  - route: [{destination: {host: ratings, subset: v1}}]"},
		{name: "bad uri regex", refused: "spec.http[0].match[0].uri.regex", spec: "  hosts: [reviews]\n  http:\n  - match: [{uri: {regex: \"/pkg(\"}}]" + to},
		{name: "bad header regex", refused: "spec.http[0].match[0].headers.x.regex", spec: "  hosts: [reviews]\n  http:\n  - match: [{headers: {x: {regex: \"a**\"}}}]" + to},
		{name: "RE2 has no lookahead", refused: "spec.http[0].match[0].uri.regex", spec: "  hosts: [reviews]\n  http:\n  - match: [{uri: {regex: \"/(?=a)\"}}]" + to},
		{name: "unknown gRPC status", refused: "spec.http[0].fault.abort.grpcStatus", spec: "  hosts: [reviews]\n  http:\n  - fault: {abort: {grpcStatus: NOPE}}" + to},
		{name: "negative retries", refused: "spec.http[0].retries.attempts", spec: "  hosts: [reviews]\n  http:\n  - retries: {attempts: -1}" + to},
		{name: "nowhere to go", refused: "spec.http[0].route", spec: "  hosts: [reviews]\n  http:\n  - timeout: 1s"},
		{name: "other gateways only", spec: "  hosts: [reviews]\n  gateways: [ingress]\n  http:\n  - route: [{destination: {host: reviews}}]",
			grpcIgnored: []string{"spec.gateways[0]"}, envoyIgnored: []string{"spec.gateways[0]"}},
		{name: "query match", applies: true, spec: "  hosts: [reviews]\n  http:\n  - match: [{queryParams: {a: {exact: b}}}]" + to,
			grpcIgnored: []string{"spec.http[0].match[0].queryParams"}},
		{name: "redirect", applies: true, spec: "  hosts: [reviews]\n  http:\n  - redirect: {uri: /x}",
			grpcIgnored: []string{"spec.http[0].redirect"}},
		{name: "redirect with scheme, port, prefix: all for Envoy", applies: true, spec: "  hosts: [reviews]\n  http:\n  - redirect: {scheme: https, port: 8443, prefixRewrite: /v2}",
			grpcIgnored: []string{"spec.http[0].redirect"}},
		{name: "redirect to the request's port", applies: true, spec: "  hosts: [reviews]\n  http:\n  - redirect: {authority: b, derivePort: FROM_REQUEST_PORT}",
			grpcIgnored: []string{"spec.http[0].redirect"}},
		{name: "direct response", applies: true, spec: "  hosts: [reviews]\n  http:\n  - directResponse: {status: 503}",
			grpcIgnored: []string{"spec.http[0].directResponse"}},
		{name: "mirror", applies: true, spec: "  hosts: [reviews]\n  http:\n  - mirror: {host: ratings}" + to,
			grpcIgnored: []string{"spec.http[0].mirror"}},
		{name: "mirrors", applies: true, spec: "  hosts: [reviews]\n  http:\n  - mirrors: [{destination: {host: ratings}, percentage: {value: 5}}]" + to,
			grpcIgnored: []string{"spec.http[0].mirrors[0].destination"}},
		{name: "bad rewrite regex", refused: "spec.http[0].rewrite.uriRegexRewrite.match", spec: "  hosts: [reviews]\n  http:\n  - rewrite: {uriRegexRewrite: {match: \"(\", rewrite: x}}" + to,
			grpcIgnored: []string{"spec.http[0].rewrite"}},
		{name: "rewrite", applies: true, spec: "  hosts: [reviews]\n  http:\n  - rewrite: {uri: /x}" + to,
			grpcIgnored: []string{"spec.http[0].rewrite"}},
		{name: "CORS", applies: true, spec: "  hosts: [reviews]\n  http:\n  - corsPolicy: {allowOrigins: [{exact: a}]}" + to,
			grpcIgnored: []string{"spec.http[0].corsPolicy"}, envoyIgnored: []string{"spec.http[0].corsPolicy"}},
		{name: "header changes are only ignored", applies: true, spec: "  hosts: [reviews]\n  http:\n  - headers: {request: {set: {a: b}}}" + to,
			grpcIgnored: []string{"spec.http[0].headers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := ConvertVirtualService(vsFromYAML(t, "vs", tc.spec), ConvertOptions{SubsetDefined: definedSubsets})
			refused := ""
			if st.Refused != nil {
				refused = st.Refused.Path
			}
			if refused != tc.refused {
				t.Fatalf("refused %+v, want %q", st.Refused, tc.refused)
			}
			if (got != nil) != tc.applies {
				t.Fatalf("converted %v, want a VirtualService: %v", got, tc.applies)
			}
			paths := func(fs []configstatus.Field) []string {
				var out []string
				for _, f := range fs {
					out = append(out, f.Path)
				}
				return out
			}
			if g := paths(st.IgnoredGRPC); !slices.Equal(g, tc.grpcIgnored) {
				t.Errorf("ignored for gRPC %v, want %v", g, tc.grpcIgnored)
			}
			if g := paths(st.IgnoredEnvoy); !slices.Equal(g, tc.envoyIgnored) {
				t.Errorf("ignored for Envoy %v, want %v", g, tc.envoyIgnored)
			}
		})
	}
}

// TestVirtualServiceRedirect: a redirect's scheme, port (or the request's)
// and prefix reach the model, as istiod's route translation reads them.
func TestVirtualServiceRedirect(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want model.HTTPRedirect
	}{
		{"{uri: /x, authority: a, redirectCode: 302}", model.HTTPRedirect{URI: "/x", Authority: "a", Code: 302}},
		{"{scheme: https, port: 8443, prefixRewrite: /v2}", model.HTTPRedirect{Scheme: "https", Port: 8443, PrefixRewrite: "/v2"}},
		{"{authority: b, derivePort: FROM_REQUEST_PORT}", model.HTTPRedirect{Authority: "b", PortFromRequest: true}},
		{"{authority: b, derivePort: FROM_PROTOCOL_DEFAULT}", model.HTTPRedirect{Authority: "b"}},
	} {
		got, st := ConvertVirtualService(vsFromYAML(t, "vs", "  hosts: [reviews]\n  http:\n  - redirect: "+tc.spec), ConvertOptions{SubsetDefined: definedSubsets})
		if st.Refused != nil || got == nil {
			t.Fatalf("%s: refused %+v", tc.spec, st.Refused)
		}
		if r := got.HTTP[0].Redirect; r == nil || *r != tc.want {
			t.Errorf("%s: redirect %+v, want %+v", tc.spec, r, tc.want)
		}
	}
}
