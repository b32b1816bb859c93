package parity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/modelcase"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStripAndDiff: intended differences leave their fields out of both
// sides, by type and client kind, "*" standing for any field or list
// element; what remains is listed field by field with both values.
func TestStripAndDiff(t *testing.T) {
	list := []Intended{
		{Path: "metadata.filter_metadata.istio", Types: []string{"clusters"}, Why: "istiod's own metadata"},
		{Path: "circuit_breakers.thresholds.*.track_remaining", Kinds: []string{"envoy"}, Why: "x"},
	}
	for i := range list {
		list[i].segments = strings.Split(list[i].Path, ".")
	}
	for _, tc := range []struct {
		desc, typ, kind string
		istiod, ours    string
		stripped        int
		want            []string
	}{
		{"istiod's metadata left out of clusters", "clusters", "grpc",
			`{"name":"c","metadata":{"filter_metadata":{"istio":{"services":[]}}}}`, `{"name":"c"}`, 1, nil},
		{"not of endpoints", "endpoints", "grpc",
			`{"metadata":{"filter_metadata":{"istio":{"a":1}}}}`, `{}`, 0, []string{"metadata"}},
		{"a list's elements by *, for Envoy only", "clusters", "envoy",
			`{"circuit_breakers":{"thresholds":[{"max_requests":1,"track_remaining":true}]}}`,
			`{"circuit_breakers":{"thresholds":[{"max_requests":2}]}}`, 1,
			[]string{"circuit_breakers.thresholds[0].max_requests"}},
		{"the same list's field differs for gRPC", "clusters", "grpc",
			`{"circuit_breakers":{"thresholds":[{"track_remaining":true}]}}`, `{"circuit_breakers":{"thresholds":[{}]}}`, 0,
			[]string{"circuit_breakers.thresholds[0].track_remaining"}},
		{"lists of other lengths are one difference", "routes", "grpc",
			`{"virtual_hosts":[{"name":"a"},{"name":"b"}]}`, `{"virtual_hosts":[{"name":"a"}]}`, 0, []string{"virtual_hosts"}},
	} {
		a, b := decode(t, tc.istiod), decode(t, tc.ours)
		n := strip(a, list, tc.typ, tc.kind) + strip(b, list, tc.typ, tc.kind)
		if n != tc.stripped {
			t.Errorf("%s: %d fields left out, want %d", tc.desc, n, tc.stripped)
		}
		var got []string
		for _, d := range diff("", a, b, nil) {
			got = append(got, d.Path)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: differences %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// TestLoadIntended: the checked-in list loads, and an entry without a
// reason is refused.
func TestLoadIntended(t *testing.T) {
	if _, err := LoadIntended("../../tools/istioparity/intended.yaml"); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "intended.yaml")
	if err := os.WriteFile(bad, []byte("- path: a.b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIntended(bad); err == nil || !strings.Contains(err.Error(), "why") {
		t.Fatalf("an entry without why: %v", err)
	}
}

// TestManifests: every case the harness runs (the generators' golden
// cases and its own) parses and is written as objects, or says why it
// cannot be; an endpoint's Pod carries its labels and IP, its slice its
// readiness and node, and the node its locality.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob("../translate/testdata/in/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := filepath.Glob("../../tools/istioparity/cases/*.yaml")
	if len(files) == 0 || len(own) == 0 {
		t.Fatalf("cases: %d golden, %d of the harness", len(files), len(own))
	}
	for _, f := range append(files, own...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := modelcase.Parse(raw)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if notComparable(in) != "" {
			continue
		}
		if _, err := manifests(in); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	in, err := modelcase.Parse([]byte(`
services:
- name: echo
  namespace: apps
  ports: [{name: grpc, port: 7070, protocol: GRPC}]
  endpoints:
  - {address: 10.2.0.1, port: 7070, portName: grpc, locality: r1/z1/s1, labels: {app: echo}, serviceAccount: echo}
  - {address: 10.2.0.2, port: 7070, portName: grpc, health: DRAINING, labels: {app: echo}}
`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := manifests(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Pods) != 2 || o.Pods[0].Status.PodIP != "10.2.0.1" || o.Pods[0].Labels["app"] != "echo" || o.Pods[0].Spec.ServiceAccountName != "echo" {
		t.Fatalf("pods: %+v", o.Pods)
	}
	if len(o.Nodes) != 1 || o.Nodes[0].Labels["topology.kubernetes.io/zone"] != "z1" || o.Nodes[0].Labels["topology.istio.io/subzone"] != "s1" {
		t.Fatalf("nodes: %+v", o.Nodes)
	}
	if len(o.EndpointSlices) != 1 || len(o.EndpointSlices[0].Endpoints) != 2 {
		t.Fatalf("slices: %+v", o.EndpointSlices)
	}
	draining := o.EndpointSlices[0].Endpoints[1].Conditions
	if *draining.Ready || !*draining.Serving || !*draining.Terminating {
		t.Fatalf("a draining endpoint's conditions: %+v", draining)
	}
	if ap := o.Services[0].Spec.Ports[0].AppProtocol; ap == nil || *ap != "grpc" {
		t.Fatalf("appProtocol %v", ap)
	}
}

// TestIntendedValueRenameAndResources: an entry with a value leaves out
// only fields holding it; one with renameTo moves the field, so that what
// it holds is still compared; a resource entry covers the names it
// matches, sent by the server it names.
func TestIntendedValueRenameAndResources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "intended.yaml")
	if err := os.WriteFile(path, []byte(`
- path: endpoints.lb_endpoints.load_balancing_weight
  value: 1
  why: the default written out
- path: tls.combined.default
  renameTo: tls.plain
  why: the same setting in another field
- resource: "*Cluster"
  sentBy: istiod
  types: [clusters]
  why: istiod's own clusters
`), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := LoadIntended(path)
	if err != nil {
		t.Fatal(err)
	}
	a := decode(t, `{"endpoints":[{"lb_endpoints":[{"load_balancing_weight":1},{"load_balancing_weight":3}]}],"tls":{"combined":{"default":{"san":"a"}}}}`)
	b := decode(t, `{"endpoints":[{"lb_endpoints":[{},{"load_balancing_weight":2}]}],"tls":{"plain":{"san":"b"}}}`)
	strip(a, list, "endpoints", "grpc")
	strip(b, list, "endpoints", "grpc")
	var got []string
	for _, d := range diff("", a, b, nil) {
		got = append(got, d.Path)
	}
	if want := "endpoints[0].lb_endpoints[1].load_balancing_weight tls.plain.san"; strings.Join(got, " ") != want {
		t.Errorf("differences %v, want %s", got, want)
	}
	if !oneSided(list, "clusters", "envoy", "BlackHoleCluster", "istiod", nil) || oneSided(list, "clusters", "envoy", "BlackHoleCluster", "meshpilot", nil) ||
		oneSided(list, "clusters", "envoy", "outbound|80||a", "istiod", nil) {
		t.Error("resource entries match the wrong names or senders")
	}
}
