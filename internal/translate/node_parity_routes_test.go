package translate

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// TestClientLabelsFromNode: node metadata LABELS, a map of strings as
// Istio's bootstraps write it, are the client's labels, bounded: values
// that are not strings, keys and values longer than Kubernetes allows,
// and labels beyond MaxClientLabels (the last by key) are dropped.
func TestClientLabelsFromNode(t *testing.T) {
	many := map[string]any{}
	for i := range MaxClientLabels + 10 {
		many[fmt.Sprintf("k%03d", i)] = "v"
	}
	for _, tc := range []struct {
		name   string
		labels any // LABELS; nil: none
		want   map[string]string
	}{
		{"none", nil, nil},
		{"strings", map[string]any{"app": "reviews", "version": "v1"}, map[string]string{"app": "reviews", "version": "v1"}},
		{"not a map", "app=reviews", nil},
		{"a value not a string", map[string]any{"app": "reviews", "n": 3.0, "b": true}, map[string]string{"app": "reviews"}},
		{"too long", map[string]any{"app": "reviews", strings.Repeat("k", 318): "v", "long": strings.Repeat("v", 64), "ok": strings.Repeat("v", 63)},
			map[string]string{"app": "reviews", "ok": strings.Repeat("v", 63)}},
		{"too many", many, func() map[string]string {
			out := map[string]string{}
			for i := range MaxClientLabels {
				out[fmt.Sprintf("k%03d", i)] = "v"
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := xdstest.GRPCNode(xdstest.NodeOptions{ID: "a", Namespace: "default"})
			if tc.labels != nil {
				v, err := structpb.NewValue(tc.labels)
				if err != nil {
					t.Fatal(err)
				}
				n.Metadata.Fields["LABELS"] = v
			}
			c := ClientFromNode(n)
			if got := c.Labels(); !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLabelsVariant: clients with the same labels, in any order, share
// a VaryLabels variant; other labels or none make another.
func TestLabelsVariant(t *testing.T) {
	with := func(l map[string]string) *Client {
		c := &Client{Namespace: "default"}
		c.SetLabels(l)
		return c
	}
	a := with(map[string]string{"app": "a", "version": "v1"})
	same := with(map[string]string{"version": "v1", "app": "a"})
	other := with(map[string]string{"app": "a", "version": "v2"})
	// A label whose value runs into the next key would collide with a
	// naive "k=v,k=v" encoding.
	tricky := with(map[string]string{"app": "a\x00version\x00v1"})
	none := with(nil)
	if VaryLabels.Of(a) != VaryLabels.Of(same) {
		t.Errorf("equal labels, different variants")
	}
	for _, c := range []*Client{other, tricky, none} {
		if VaryLabels.Of(a) == VaryLabels.Of(c) {
			t.Errorf("labels %v share a's variant", c.Labels())
		}
	}
	if VaryNamespace.Of(a) != VaryNamespace.Of(other) {
		t.Errorf("labels change a variant that does not vary by them")
	}
}

// TestSourceMatches: a match with sourceLabels or sourceNamespace
// applies only to clients whose labels include them and of that
// namespace, as istiod's sourceMatchHTTP; others get the next route.
// The route then varies by what it checks, and a VirtualService without
// them leaves every client one shared answer.
func TestSourceMatches(t *testing.T) {
	host := model.ServiceHostname("reviews", "default", "")
	v1, v2, all := model.ClusterName(9080, "v1", host), model.ClusterName(9080, "v2", host), model.ClusterName(9080, "", host)
	to := func(subset string) []model.RouteDestination {
		return []model.RouteDestination{{Host: host, Subset: subset, Weight: 100}}
	}
	client := func(grpc bool, ns string, labels map[string]string) *Client {
		c := &Client{GRPC: grpc, Namespace: ns}
		c.SetLabels(labels)
		return c
	}
	tester := map[string]string{"app": "tester", "version": "v9"}
	for _, tc := range []struct {
		name  string
		match model.HTTPMatch
		// cluster of the first route for a client of default with
		// tester's labels, of default without, of other with them
		tester, plain, otherNS string
		vary                   Vary
	}{
		{"sourceLabels", model.HTTPMatch{SourceLabels: model.Labels{"app": "tester"}}, v1, v2, v1, VaryKind | VaryLabels},
		{"sourceLabels, all of them", model.HTTPMatch{SourceLabels: model.Labels{"app": "tester", "version": "v1"}}, v2, v2, v2, VaryKind | VaryLabels},
		{"sourceNamespace", model.HTTPMatch{SourceNamespace: "default"}, v1, v1, v2, VaryKind | VaryNamespace},
		{"both", model.HTTPMatch{SourceLabels: model.Labels{"app": "tester"}, SourceNamespace: "default"}, v1, v2, v2, VaryKind | VaryNamespace | VaryLabels},
		{"neither", model.HTTPMatch{}, v1, v1, v1, VaryKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
				HTTP: []model.HTTPRoute{{Match: []model.HTTPMatch{tc.match}, Route: to("v1")}, {Route: to("v2")}}})
			for _, grpc := range []bool{true, false} {
				for _, c := range []struct {
					client *Client
					want   string
				}{
					{client(grpc, "default", tester), tc.tester},
					{client(grpc, "default", nil), tc.plain},
					{client(grpc, "other", tester), tc.otherNS},
				} {
					routes, res := generatedRoutes(t, g, c.client, name)
					if got := routes[0].GetRoute().GetCluster(); got != c.want {
						t.Errorf("gRPC %v, client in %s with %v: cluster %s, want %s", grpc, c.client.Namespace, c.client.Labels(), got, c.want)
					}
					if res.Vary != tc.vary {
						t.Errorf("vary %b, want %b", res.Vary, tc.vary)
					}
				}
			}
		})
	}
	t.Run("every match for other clients: the default route", func(t *testing.T) {
		g, name := routeParityGenerator(t, &model.VirtualService{Namespace: "default", Name: "r", Hosts: []model.Hostname{host},
			HTTP: []model.HTTPRoute{{Match: []model.HTTPMatch{{SourceLabels: model.Labels{"app": "tester"}}}, Route: to("v1")}}})
		routes, res := generatedRoutes(t, g, client(true, "default", nil), name)
		if got := routes[0].GetRoute().GetCluster(); got != all || res.Vary&VaryLabels == 0 {
			t.Errorf("cluster %s, vary %b: want the default route %s, varying by labels", got, res.Vary, all)
		}
	})
}

// TestLabelSetsNeverShareAKey: the cache key of a client's labels keeps
// every key and value apart, whatever bytes they hold, so that two
// clients with different labels never share a variant of a route that
// checks them.
func TestLabelSetsNeverShareAKey(t *testing.T) {
	for _, pair := range [][2]map[string]string{
		{{"a": "x\x01b"}, {"a": "x", "b": ""}},
		{{"ab": "c"}, {"a": "bc"}},
		{{"a": ""}, {"a": "", "": ""}},
	} {
		var x, y Client
		x.SetLabels(pair[0])
		y.SetLabels(pair[1])
		if x.labelsKey == y.labelsKey && !maps.Equal(x.Labels(), y.Labels()) {
			t.Errorf("%q and %q share the key %q", pair[0], pair[1], x.labelsKey)
		}
	}
}
