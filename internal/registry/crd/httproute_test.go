package crd

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/configstatus/statustest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// describeRule writes a converted rule on one line, for the tables:
// "<name> <matches> -> <what it does>".
func describeRule(r model.HTTPRoute) string {
	var b strings.Builder
	b.WriteString(r.Name)
	for _, m := range r.Match {
		b.WriteString(" [")
		var parts []string
		if m.Port != 0 {
			parts = append(parts, fmt.Sprintf("port=%d", m.Port))
		}
		if m.URI != nil {
			parts = append(parts, fmt.Sprintf("uri%s%s", matchOp(m.URI.Kind), m.URI.Value))
		}
		for _, h := range m.Headers {
			parts = append(parts, fmt.Sprintf("%s%s%s", h.Name, matchOp(h.Kind), h.Value))
		}
		for _, q := range m.QueryParams {
			parts = append(parts, fmt.Sprintf("?%s%s%s", q.Name, matchOp(q.Kind), q.Value))
		}
		b.WriteString(strings.Join(parts, " ") + "]")
	}
	b.WriteString(" ->")
	for _, d := range r.Route {
		fmt.Fprintf(&b, " %s:%d@%d", strings.TrimSuffix(string(d.Host), ".svc.cluster.local"), d.Port, d.Weight)
	}
	if r.DirectResponse != nil {
		fmt.Fprintf(&b, " answer %d", r.DirectResponse.Status)
	}
	if r.Redirect != nil {
		fmt.Fprintf(&b, " redirect %s%s %d", r.Redirect.Authority, r.Redirect.URI, r.Redirect.Code)
	}
	if r.Timeout != 0 {
		fmt.Fprintf(&b, " timeout=%s", r.Timeout)
	}
	if rt := r.Retries; rt != nil {
		fmt.Fprintf(&b, " retries=%d/%s/%s/%s", rt.Attempts, rt.RetryOn, rt.PerTryTimeout, rt.Backoff)
	}
	if rw := r.Rewrite; rw != nil {
		fmt.Fprintf(&b, " rewrite=%q,%q,%q,%q", rw.URI, rw.Authority, rw.RegexMatch, rw.RegexSubstitute)
	}
	for _, m := range r.Mirror {
		fmt.Fprintf(&b, " mirror=%s:%d@%g", strings.TrimSuffix(string(m.Destination.Host), ".svc.cluster.local"), m.Destination.Port, m.Percent)
	}
	if h := r.Headers; h != nil {
		fmt.Fprintf(&b, " headers=%v%v%v/%v%v%v", h.RequestSet, h.RequestAdd, h.RequestRemove, h.ResponseSet, h.ResponseAdd, h.ResponseRemove)
	}
	return b.String()
}

func matchOp(k model.MatchKind) string {
	switch k {
	case model.MatchExact:
		return "="
	case model.MatchPrefix:
		return "^="
	case model.MatchRegex:
		return "~="
	}
	return "?"
}

// describeRoute writes a route's parents and rules, one line each, and
// its conditions: "<host> producer|consumer", "  <rule>", and
// "<parent>: Accepted=<status>/<reason> ResolvedRefs=<status>/<reason>".
func describeRoute(gr *GatewayRoute) []string {
	var out []string
	for _, p := range gr.Parents {
		who := "consumer"
		if p.Producer {
			who = "producer"
		}
		out = append(out, strings.TrimSuffix(string(p.Host), ".svc.cluster.local")+" "+who)
		for _, r := range p.Rules {
			out = append(out, "  "+describeRule(r))
		}
	}
	for _, p := range gr.RouteStatus.Parents {
		line := string(p.ParentRef.Name) + ":"
		for _, c := range p.Conditions {
			line += fmt.Sprintf(" %s=%s/%s", c.Type, c.Status, c.Reason)
		}
		out = append(out, line)
	}
	return out
}

func parseHTTPRoute(t *testing.T, doc string) *gatewayv1.HTTPRoute {
	t.Helper()
	var r gatewayv1.HTTPRoute
	if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
		t.Fatal(err)
	}
	if r.Namespace == "" {
		r.Namespace = "shop"
	}
	return &r
}

// grant lets routes of namespace from name the Services of namespace to.
func grant(from, to, kind string) *gatewayv1beta1.ReferenceGrant {
	g := &gatewayv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: to, Name: "allow-" + from}}
	g.Spec.From = []gatewayv1beta1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: gatewayv1.Kind(kind), Namespace: gatewayv1.Namespace(from)}}
	g.Spec.To = []gatewayv1beta1.ReferenceGrantTo{{Group: "", Kind: "Service"}}
	return g
}

// TestConvertHTTPRoute: each rule of an HTTPRoute as the mesh applies it,
// as istiod converts it, and the route's status for each Service parent.
func TestConvertHTTPRoute(t *testing.T) {
	const parent = "metadata: {name: r}\nspec:\n  parentRefs: [{group: \"\", kind: Service, name: cart, port: 8080}]\n"
	missing := func(ns, name string) bool { return name != "gone" }
	for _, tc := range []struct {
		name   string
		doc    string
		opts   GatewayConvertOptions
		want   []string
		grpc   []string // paths of fields gRPC clients do not get
		envoy  []string // and Envoy
		refuse string
	}{
		{
			name: "weighted backends, port as a match, producer",
			doc: parent + `  rules:
  - backendRefs: [{name: v1, port: 80, weight: 3}, {name: v2, port: 80, weight: 1}, {name: v3, port: 80, weight: 0}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@3 v2.shop:80@1",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "one backend takes every request, whatever its weight",
			doc: parent + `  rules:
  - backendRefs: [{name: v1, port: 80, weight: 7}, {name: v2, port: 80, weight: 0}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "every weight 0: the rule answers 500",
			doc: parent + `  rules:
  - backendRefs: [{name: v1, port: 80, weight: 0}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> answer 500",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].backendRefs"},
		},
		{
			name: "a consumer route of another namespace, without a port",
			doc: `metadata: {name: r, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: cart-canary, namespace: shop, port: 80}]`,
			opts: GatewayConvertOptions{Grants: []*gatewayv1beta1.ReferenceGrant{grant("web", "shop", "HTTPRoute")}},
			want: []string{"cart.shop consumer", "  web.r.0 [uri^=/] -> cart-canary.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "a backend of another namespace without a ReferenceGrant is left out",
			doc: `metadata: {name: r, namespace: web}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, namespace: shop}]
  rules:
  - backendRefs: [{name: cart-canary, namespace: shop, port: 80}, {name: local, port: 80}]`,
			opts: GatewayConvertOptions{Grants: []*gatewayv1beta1.ReferenceGrant{grant("web", "shop", "GRPCRoute"), grant("other", "shop", "HTTPRoute")}},
			want: []string{"cart.shop consumer", "  web.r.0 [uri^=/] -> local.web:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted"},
			grpc:  []string{"spec.rules[0].backendRefs[0]"},
			envoy: []string{"spec.rules[0].backendRefs[0]"},
		},
		{
			name: "a backend of another kind is left out; none left: 500",
			doc: parent + `  rules:
  - backendRefs: [{group: example.com, kind: Bucket, name: b, port: 80}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> answer 500",
				"cart: Accepted=True/Accepted ResolvedRefs=False/InvalidKind"},
			grpc:  []string{"spec.rules[0].backendRefs[0]", "spec.rules[0].backendRefs"},
			envoy: []string{"spec.rules[0].backendRefs[0]"},
		},
		{
			name: "a backend Service that does not exist stays: its requests fail",
			doc: parent + `  rules:
  - backendRefs: [{name: gone, port: 80}]`,
			opts: GatewayConvertOptions{ServiceExists: missing},
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> gone.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"},
		},
		{
			name: "a parent Service that does not exist: not attached",
			doc: `metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: gone}, {name: gw}]
  rules:
  - backendRefs: [{name: v1, port: 80}]`,
			opts:  GatewayConvertOptions{ServiceExists: missing},
			want:  []string{"gone: Accepted=False/NoMatchingParent ResolvedRefs=True/ResolvedRefs"},
			grpc:  []string{"spec.parentRefs[1]"},
			envoy: []string{"spec.parentRefs[1]"},
		},
		{
			name: "matches: one rule each, path kinds, headers, method, query",
			doc: parent + `  rules:
  - name: api
    matches:
    - path: {type: PathPrefix, value: /api/}
    - path: {type: Exact, value: /healthz}
      method: GET
    - path: {type: RegularExpression, value: "/v[0-9]+/.*"}
      headers: [{name: X-User, value: alice}, {name: x-tier, type: RegularExpression, value: "gold|silver"}]
      queryParams: [{name: Debug, value: "1"}]
    - headers: [{name: x-any, value: "y"}]
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer",
				"  api [port=8080 uri^=/api] -> v1.shop:80@100",
				"  api [port=8080 uri=/healthz :method=GET] -> v1.shop:80@100",
				"  api [port=8080 uri~=/v[0-9]+/.* x-tier~=gold|silver x-user=alice ?Debug=1] -> v1.shop:80@100",
				"  api [port=8080 uri^=/ x-any=y] -> v1.shop:80@100",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].matches[1].method", "spec.rules[0].matches[2].queryParams"},
		},
		{
			name: "timeouts without retry: backendRequest bounds the request, as istiod",
			doc: parent + `  rules:
  - timeouts: {request: 10s, backendRequest: 2s}
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100 timeout=2s",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "retry with timeouts: backendRequest bounds each attempt",
			doc: parent + `  rules:
  - timeouts: {request: 10s, backendRequest: 2s}
    retry: {attempts: 3, codes: [503], backoff: 100ms}
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer",
				"  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100 timeout=10s retries=3/connect-failure,refused-stream,unavailable,cancelled,503/2s/100ms",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].retry.codes", "spec.rules[0].timeouts.backendRequest"},
		},
		{
			name: "retry attempts 0: none",
			doc: parent + `  rules:
  - retry: {attempts: 0}
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100 retries=0//0s/0s",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
		},
		{
			name: "filters: header changes, rewrite, mirror for Envoy",
			doc: parent + `  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-Env, value: prod}], add: [{name: x-via, value: mesh}], remove: [X-Debug]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-served, value: "1"}]}
    - type: URLRewrite
      urlRewrite: {hostname: cart.internal, path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2/}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 80}, fraction: {numerator: 1, denominator: 4}}
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer",
				`  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100 rewrite="/v2","cart.internal","","" mirror=shadow.shop:80@25 headers=map[x-env:prod]map[x-via:mesh][x-debug]/map[x-served:1]map[][]`,
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].filters[0]", "spec.rules[0].filters[1]", "spec.rules[0].filters[2]", "spec.rules[0].filters[3].requestMirror"},
		},
		{
			name: "a full path rewrite is a regular expression, as istiod",
			doc: parent + `  rules:
  - filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /index}}}]
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer", `  shop.r.0 [port=8080 uri^=/] -> v1.shop:80@100 rewrite="","","/.*","/index"`,
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].filters[0]"},
		},
		{
			name: "a redirect answers by itself",
			doc: parent + `  rules:
  - filters: [{type: RequestRedirect, requestRedirect: {hostname: new.example.com, statusCode: 301, scheme: https}}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> redirect new.example.com 301",
				"cart: Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs"},
			grpc: []string{"spec.rules[0].filters[0]"},
		},
		{
			name: "an unsupported filter: the rule answers 500, Accepted False",
			doc: parent + `  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Plugin, name: p}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {value: /ok}}]
    backendRefs: [{name: v1, port: 80}]`,
			want: []string{"cart.shop producer", "  shop.r.0 [port=8080 uri^=/] -> answer 500", "  shop.r.1 [port=8080 uri^=/ok] -> v1.shop:80@100",
				"cart: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
			grpc:  []string{"spec.rules[0].filters[0]"},
			envoy: []string{"spec.rules[0].filters[0]"},
		},
		{
			name: "sectionName on a Service is not supported",
			doc: `metadata: {name: r}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, sectionName: http}]
  rules:
  - backendRefs: [{name: v1, port: 80}]`,
			want:  []string{"cart: Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs"},
			grpc:  []string{"spec.parentRefs[0].sectionName"},
			envoy: []string{"spec.parentRefs[0].sectionName"},
		},
		{
			name: "a regular expression that is not RE2 is refused",
			doc: parent + `  rules:
  - matches: [{path: {type: RegularExpression, value: "(?<=a)b"}}]
    backendRefs: [{name: v1, port: 80}]`,
			refuse: "spec.rules[0].matches[0].path.value",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ConvertHTTPRoute(parseHTTPRoute(t, tc.doc), tc.opts)
			statustest.Check(t, got.Status, false)
			if tc.refuse != "" {
				if got.Status.Refused == nil || got.Status.Refused.Path != tc.refuse {
					t.Fatalf("refused %+v, want %s", got.Status.Refused, tc.refuse)
				}
				return
			}
			if got.Status.Refused != nil {
				t.Fatalf("refused: %+v", *got.Status.Refused)
			}
			if d := describeRoute(got); !slices.Equal(d, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(tc.want, "\n"))
			}
			checkPaths(t, "gRPC", got.Status.IgnoredGRPC, tc.grpc)
			checkPaths(t, "Envoy", got.Status.IgnoredEnvoy, tc.envoy)
		})
	}
}

func checkPaths(t *testing.T, who string, fields []configstatus.Field, want []string) {
	t.Helper()
	var got []string
	for _, f := range fields {
		got = append(got, f.Path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("not for %s: %q, want %q", who, got, want)
	}
}

// TestMergeGatewayRoutes: the rules of every route attached to a host
// merge into one VirtualService per namespace, in the Gateway API's
// precedence, older routes first among equals.
func TestMergeGatewayRoutes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(ns, name string, age time.Duration, doc string) *GatewayRoute {
		r := parseHTTPRoute(t, "metadata: {name: "+name+", namespace: "+ns+"}\nspec:\n  parentRefs: [{group: \"\", kind: Service, name: cart, namespace: shop}]\n  rules:\n"+doc)
		r.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		return ConvertHTTPRoute(r, GatewayConvertOptions{})
	}
	newer := mk("shop", "a-newer", 0, `  - matches: [{path: {value: /api}}, {path: {type: Exact, value: /api/x}}]
    backendRefs: [{name: v2, port: 80}]
  - backendRefs: [{name: v2, port: 80}]`)
	older := mk("shop", "z-older", time.Hour, `  - matches: [{path: {value: /api}}, {path: {value: /api/long}}, {path: {value: /api}, method: GET}, {path: {value: /api}, headers: [{name: a, value: b}]}]
    backendRefs: [{name: v1, port: 80}]
  - backendRefs: [{name: v1, port: 80}]`)
	consumer := mk("web", "c", 0, `  - backendRefs: [{name: v3, namespace: web, port: 80}]`)
	vss := MergeGatewayRoutes([]*GatewayRoute{newer, consumer, older})
	if len(vss) != 2 {
		t.Fatalf("%d VirtualServices, want 2", len(vss))
	}
	shop, web := vss[0], vss[1]
	if shop.Namespace != "shop" || !shop.Producer || !shop.Gateway || !shop.Created.Equal(t0.Add(-time.Hour)) {
		t.Errorf("shop's: %+v", shop)
	}
	if web.Namespace != "web" || web.Producer || len(web.HTTP) != 1 {
		t.Errorf("web's: %+v", web)
	}
	var got []string
	for _, r := range shop.HTTP {
		got = append(got, describeRule(r))
	}
	want := []string{
		"shop.a-newer.0 [uri=/api/x] -> v2.shop:80@100",
		"shop.z-older.0 [uri^=/api/long] -> v1.shop:80@100",
		"shop.z-older.0 [uri^=/api :method=GET] -> v1.shop:80@100",
		"shop.z-older.0 [uri^=/api a=b] -> v1.shop:80@100",
		"shop.z-older.0 [uri^=/api] -> v1.shop:80@100",
		"shop.a-newer.0 [uri^=/api] -> v2.shop:80@100",
		"shop.z-older.1 [uri^=/] -> v1.shop:80@100",
		"shop.a-newer.1 [uri^=/] -> v2.shop:80@100",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
