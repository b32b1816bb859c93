package translate

import (
	"fmt"
	"slices"
	"testing"
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// routeParityGenerator serves reviews (port 9080, in default) with the
// VirtualServices given.
func routeParityGenerator(t *testing.T, vss ...*model.VirtualService) (*routeGenerator, string) {
	t.Helper()
	st := model.NewStore()
	svc := service("reviews", "default", 9080)
	st.Update(svc, nil)
	routes := &testRoutes{}
	routes.set(vss...)
	return &routeGenerator{GeneratorOptions{Discovery: st, Routes: routes}}, model.ClusterName(9080, "", svc.Hostname)
}

// generatedRoutes generates a route configuration for c, checks it
// against the envoy protos' rules and returns its routes.
func generatedRoutes(t *testing.T, g *routeGenerator, c *Client, name string) ([]*route.Route, Result) {
	t.Helper()
	res := g.Generate(c, name)
	rc, ok := res.Resource.(*route.RouteConfiguration)
	if !ok {
		t.Fatalf("no route configuration: %v", res.Resource)
	}
	if err := Validate(rc); err != nil {
		t.Fatalf("invalid: %v", err)
	}
	return rc.GetVirtualHosts()[0].GetRoutes(), res
}

// TestWeightsAreRelative: the weights of a route's destinations go to
// weighted_clusters as written, whatever their total, for gRPC clients
// and Envoy alike (both divide by the total), a destination of weight 0
// left out, as istiod writes them.
func TestWeightsAreRelative(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	for _, tc := range []struct {
		name    string
		dests   []model.RouteDestination
		cluster string   // a lone cluster
		want    []string // else subset:weight
	}{
		{"3 and 1", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 3}, {Host: host, Subset: "v2", Weight: 1}}, "", []string{"v1:3", "v2:1"}},
		{"beyond 100", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 150}, {Host: host, Subset: "v2", Weight: 50}}, "", []string{"v1:150", "v2:50"}},
		{"a 0 left out", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 0}, {Host: host, Subset: "v2", Weight: 7}}, "", []string{"v2:7"}},
		{"a lone destination", []model.RouteDestination{{Host: host, Subset: "v1", Weight: 100}}, model.ClusterName(9080, "v1", host), nil},
	} {
		g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
			HTTP: []model.HTTPRoute{{Route: tc.dests}}})
		for _, c := range []*Client{{GRPC: true, Namespace: "default"}, {Namespace: "default"}} {
			routes, _ := generatedRoutes(t, g, c, name)
			a := routes[0].GetRoute()
			if tc.cluster != "" {
				if a.GetCluster() != tc.cluster {
					t.Errorf("%s, gRPC %v: cluster %q, want %q", tc.name, c.GRPC, a.GetCluster(), tc.cluster)
				}
				continue
			}
			var got []string
			for _, cw := range a.GetWeightedClusters().GetClusters() {
				k, _ := model.ParseClusterName(cw.GetName())
				got = append(got, fmt.Sprintf("%s:%d", k.Subset, cw.GetWeight().GetValue()))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s, gRPC %v: weighted clusters %v, want %v", tc.name, c.GRPC, got, tc.want)
			}
		}
	}
}

// TestGRPCClientsGetWhatTheyCanHonour: a field grpc-go cannot honour no
// longer costs gRPC clients the whole VirtualService: the route pinned
// to v1 keeps its subset, timeout and retries, as istiod's does, while
// what grpc-go would ignore (mirror, rewrite) is left out and routes it
// skips or fails (a query match, a redirect) are sent as istiod sends
// them. Envoy gets everything.
func TestGRPCClientsGetWhatTheyCanHonour(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	v1 := model.ClusterName(9080, "v1", host)
	pinned := model.HTTPRoute{Route: []model.RouteDestination{{Host: host, Subset: "v1", Weight: 100}},
		Timeout: 3 * time.Second, Retries: &model.HTTPRetry{Attempts: 1, RetryOn: "unavailable"}}
	with := func(f func(r *model.HTTPRoute)) model.HTTPRoute {
		r := pinned
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name   string
		routes []model.HTTPRoute
		// the gRPC client's routes: "v1" the pinned route, "redirect",
		// "direct", "query" a route with a query match
		grpc []string
	}{
		{"mirror", []model.HTTPRoute{with(func(r *model.HTTPRoute) {
			r.Mirror = []model.HTTPMirror{{Destination: model.RouteDestination{Host: host, Subset: "v2"}, Percent: 100}}
		})}, []string{"v1"}},
		{"rewrite", []model.HTTPRoute{with(func(r *model.HTTPRoute) { r.Rewrite = &model.HTTPRewrite{URI: "/x", Authority: "other"} })}, []string{"v1"}},
		{"regex rewrite", []model.HTTPRoute{with(func(r *model.HTTPRoute) { r.Rewrite = &model.HTTPRewrite{RegexMatch: "^/a", RegexSubstitute: "/b"} })}, []string{"v1"}},
		{"a redirect before", []model.HTTPRoute{{Match: []model.HTTPMatch{{URI: &model.StringMatch{Kind: model.MatchPrefix, Value: "/old"}}},
			Redirect: &model.HTTPRedirect{URI: "/new"}}, pinned}, []string{"redirect", "v1"}},
		{"a direct response before", []model.HTTPRoute{{Match: []model.HTTPMatch{{URI: &model.StringMatch{Kind: model.MatchPrefix, Value: "/down"}}},
			DirectResponse: &model.HTTPDirectResponse{Status: 503}}, pinned}, []string{"direct", "v1"}},
		{"a query match before", []model.HTTPRoute{with(func(r *model.HTTPRoute) {
			r.Match = []model.HTTPMatch{{QueryParams: []model.HeaderMatch{{Name: "debug", StringMatch: model.StringMatch{Kind: model.MatchExact, Value: "1"}}}}}
		}), pinned}, []string{"query", "v1"}},
		{"a method match before", []model.HTTPRoute{with(func(r *model.HTTPRoute) {
			r.Match = []model.HTTPMatch{{Headers: []model.HeaderMatch{{Name: ":method", StringMatch: model.StringMatch{Kind: model.MatchExact, Value: "GET"}}}}}
		}), pinned}, []string{"v1", "v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host}, HTTP: tc.routes})
			routes, _ := generatedRoutes(t, g, &Client{GRPC: true, Namespace: "default"}, name)
			var got []string
			for _, r := range routes {
				a := r.GetRoute()
				switch {
				case r.GetRedirect() != nil:
					got = append(got, "redirect")
				case r.GetDirectResponse() != nil:
					got = append(got, "direct")
				case len(r.GetMatch().GetQueryParameters()) > 0:
					got = append(got, "query")
				case a.GetCluster() == v1:
					got = append(got, "v1")
					if a.GetMaxStreamDuration().GetMaxStreamDuration().AsDuration() != 3*time.Second || a.GetRetryPolicy().GetNumRetries().GetValue() != 1 {
						t.Errorf("the pinned route lost its timeout or retries: %v", a)
					}
					if len(a.GetRequestMirrorPolicies()) > 0 || a.GetPrefixRewrite() != "" || a.GetRegexRewrite() != nil || a.GetHostRewriteLiteral() != "" {
						t.Errorf("a gRPC client got what grpc-go ignores: %v", a)
					}
				default:
					got = append(got, fmt.Sprint(r))
				}
			}
			if !slices.Equal(got, tc.grpc) {
				t.Errorf("gRPC client's routes %v, want %v", got, tc.grpc)
			}
			envoy, _ := generatedRoutes(t, g, &Client{Namespace: "default"}, name)
			if len(envoy) != len(routes) {
				t.Errorf("Envoy got %d routes, gRPC %d: want the same routes", len(envoy), len(routes))
			}
			last := envoy[len(envoy)-1].GetRoute()
			if len(tc.routes[len(tc.routes)-1].Mirror) > 0 && len(last.GetRequestMirrorPolicies()) == 0 ||
				tc.routes[len(tc.routes)-1].Rewrite != nil && last.GetPrefixRewrite() == "" && last.GetRegexRewrite() == nil {
				t.Errorf("Envoy lost the mirror or rewrite: %v", last)
			}
		})
	}
}

// TestNothingAfterACatchAll: as istiod, the routes after one that
// matches every request ("/" or ".*", no header or query condition) are
// not sent, since no request reaches them; a route that matches every
// request of other clients only (sourceLabels) does not end a client's
// list.
func TestNothingAfterACatchAll(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	to := func(subset string) []model.RouteDestination {
		return []model.RouteDestination{{Host: host, Subset: subset, Weight: 100}}
	}
	prefix := func(p string) *model.StringMatch { return &model.StringMatch{Kind: model.MatchPrefix, Value: p} }
	for _, tc := range []struct {
		name  string
		first model.HTTPMatch
		want  int // routes sent
	}{
		{"prefix /", model.HTTPMatch{URI: prefix("/")}, 1},
		{"regex .*", model.HTTPMatch{URI: &model.StringMatch{Kind: model.MatchRegex, Value: ".*"}}, 1},
		{"this port", model.HTTPMatch{Port: 9080}, 1},
		{"another prefix", model.HTTPMatch{URI: prefix("/a")}, 2},
		{"a header", model.HTTPMatch{Headers: []model.HeaderMatch{{Name: "x", StringMatch: model.StringMatch{Kind: model.MatchPresent}}}}, 2},
		{"for other clients", model.HTTPMatch{SourceLabels: model.Labels{"app": "tester"}}, 1},
	} {
		g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
			HTTP: []model.HTTPRoute{{Match: []model.HTTPMatch{tc.first}, Route: to("v1")}, {Route: to("v2")}}})
		for _, c := range []*Client{{GRPC: true, Namespace: "default"}, {Namespace: "default"}} {
			if routes, _ := generatedRoutes(t, g, c, name); len(routes) != tc.want {
				t.Errorf("%s, gRPC %v: %d routes, want %d", tc.name, c.GRPC, len(routes), tc.want)
			}
		}
	}
}
