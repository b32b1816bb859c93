package watch

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func text(fs []Field) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.Key+"="+f.Value)
	}
	return strings.Join(parts, " ")
}

func TestSummaries(t *testing.T) {
	cases := []struct {
		name, group, kind, yaml, want string
	}{
		{"service", "", "Service", `
spec:
  clusterIP: 10.96.0.10
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
  - {port: 9090}
`, "type=ClusterIP clusterIP=10.96.0.10 ports=http:80/TCP,dns:53/UDP,9090/TCP"},
		{"headless", "", "Service", `
spec: {type: ClusterIP, clusterIP: None, ports: [{name: grpc, port: 9000, protocol: TCP}]}
`, "type=ClusterIP clusterIP=None ports=grpc:9000/TCP"},
		{"externalname", "", "Service", `
spec: {type: ExternalName, externalName: db.example.com}
`, "type=ExternalName externalName=db.example.com ports="},
		{"slice", "discovery.k8s.io", "EndpointSlice", `
metadata: {labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [192.0.2.1], conditions: {ready: true}}
- {addresses: [192.0.2.2], conditions: {ready: false}}
- {addresses: [192.0.2.3]}
ports: [{name: http, port: 8080, protocol: TCP}]
`, "service=web ready=2/3 addressType=IPv4 ports=http:8080/TCP"},
		{"empty slice", "discovery.k8s.io", "EndpointSlice", `
addressType: IPv6
`, "service= ready=0/0 addressType=IPv6 ports="},
		{"pod", "", "Pod", `
spec: {nodeName: node-1}
status:
  phase: Running
  podIP: 10.0.0.5
  conditions: [{type: PodScheduled, status: "True"}, {type: Ready, status: "True"}]
`, "phase=Running ready=true ip=10.0.0.5 node=node-1"},
		{"pending pod", "", "Pod", `
status: {phase: Pending, conditions: [{type: Ready, status: "False"}]}
`, "phase=Pending ready=false ip= node="},
		{"node", "", "Node", `
metadata: {labels: {topology.kubernetes.io/zone: eu-1a}}
status: {conditions: [{type: Ready, status: "True"}]}
`, "zone=eu-1a ready=True"},
		{"node without status", "", "Node", `
metadata: {labels: {failure-domain.beta.kubernetes.io/zone: old}}
`, "zone=old ready=Unknown"},
		{"namespace", "", "Namespace", `
metadata: {labels: {team: a, env: prod}}
status: {phase: Active}
`, "phase=Active labels=env=prod,team=a"},
		{"custom", "example.com", "Widget", `
metadata: {labels: {size: big}}
`, "labels=size=big"},
		{"custom without labels", "example.com", "Widget", `
spec: {}
`, ""},
		{"not the core Service", "example.com", "Service", `
spec: {type: Foo}
`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := text(Summarize(c.group, c.kind, obj(t, c.yaml))); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestEventFormats(t *testing.T) {
	target := Target{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Kind: "Service", Namespaced: true}
	o := obj(t, `
metadata: {name: web, namespace: demo, resourceVersion: "42"}
spec: {clusterIP: 10.96.0.1, ports: [{name: http, port: 80, protocol: TCP}]}
`)
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.FixedZone("x", 3600))
	e := NewEvent(now, "ADDED", target, o)
	want := "2026-01-02T02:04:05.678Z ADDED    Service demo/web rv=42 type=ClusterIP clusterIP=10.96.0.1 ports=http:80/TCP"
	if got := e.Text(); got != want {
		t.Errorf("text\n got %q\nwant %q", got, want)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{
		"time": "2026-01-02T02:04:05.678Z", "event": "ADDED", "kind": "Service", "apiVersion": "v1",
		"namespace": "demo", "name": "web", "resourceVersion": "42",
		"summary": map[string]any{"type": "ClusterIP", "clusterIP": "10.96.0.1", "ports": "http:80/TCP"},
	}
	if !reflect.DeepEqual(m, wantJSON) {
		t.Errorf("json %s", b)
	}

	node := Target{GVR: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Kind: "Node"}
	e = NewEvent(now, "DELETED", node, obj(t, `metadata: {name: n1, resourceVersion: "7"}`))
	if got, want := e.Text(), "2026-01-02T02:04:05.678Z DELETED  Node n1 rv=7 zone=<none> ready=Unknown"; got != want {
		t.Errorf("text\n got %q\nwant %q", got, want)
	}
}

func TestNamespaces(t *testing.T) {
	cases := []struct {
		flag []string
		all  bool
		def  string
		want []string
	}{
		{nil, false, "default", []string{"default"}},
		{nil, false, "team-a", []string{"team-a"}},
		{[]string{"a", "b", "a", " "}, false, "default", []string{"a", "b"}},
		{[]string{"a"}, true, "default", nil},
		{nil, true, "default", nil},
	}
	for _, c := range cases {
		if got := Namespaces(c.flag, c.all, c.def); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Namespaces(%v, %v, %q) = %v, want %v", c.flag, c.all, c.def, got, c.want)
		}
	}
}

func testGroups() []groupResources {
	res := func(name, singular, kind string, namespaced bool, short ...string) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: namespaced, ShortNames: short, Verbs: []string{"list", "watch"}}
	}
	return []groupResources{
		{
			group: metav1.APIGroup{Name: "", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "v1", Version: "v1"}},
				PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "v1", Version: "v1"}},
			resources: map[string][]metav1.APIResource{"v1": {
				res("services", "service", "Service", true, "svc"),
				res("pods", "pod", "Pod", true, "po"),
				res("pods/status", "", "Pod", true),
				res("nodes", "node", "Node", false, "no"),
			}},
		},
		{
			group: metav1.APIGroup{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{
				{GroupVersion: "example.com/v1", Version: "v1"}, {GroupVersion: "example.com/v1beta1", Version: "v1beta1"}},
				PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1", Version: "v1"}},
			resources: map[string][]metav1.APIResource{
				"v1":      {res("widgets", "widget", "Widget", true, "wd")},
				"v1beta1": {res("widgets", "widget", "Widget", true, "wd"), res("gadgets", "gadget", "Gadget", false, "po")},
			},
		},
	}
}

func testMapper() meta.RESTMapper {
	groups := testGroups()
	return shortNames{RESTMapper: newMapper(groups), groups: groups}
}

func TestResolve(t *testing.T) {
	m := testMapper()
	got, err := Resolve(m, []string{"services", "pod", "Node", "widgets.example.com", "widget.v1.example.com", "service", "svc", "wd", "gadgets"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range got {
		names = append(names, tg.GVR.String()+" "+tg.Kind+" "+map[bool]string{true: "namespaced", false: "cluster"}[tg.Namespaced])
	}
	want := []string{
		"/v1, Resource=services Service namespaced",
		"/v1, Resource=pods Pod namespaced",
		"/v1, Resource=nodes Node cluster",
		"example.com/v1, Resource=widgets Widget namespaced",
		"example.com/v1beta1, Resource=gadgets Gadget cluster",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("got %q\nwant %q", names, want)
	}

	_, err = Resolve(m, []string{"services", "foo"})
	if _, ok := err.(*NoResourceError); !ok || !strings.HasPrefix(err.Error(), `the server has no resource "foo"; see "kubectl api-resources"`) {
		t.Errorf("error %v", err)
	}
	if _, err := Resolve(m, []string{" "}); err == nil {
		t.Error("no error for an empty list")
	}
}

// TestShortNames: a short name resolves to its resource; one that two
// resources claim goes to the first in discovery's order, with a warning;
// full and singular names are never taken for short ones.
func TestShortNames(t *testing.T) {
	groups := testGroups()
	var warnings []string
	m := shortNames{RESTMapper: newMapper(groups), groups: groups, warn: func(w string) { warnings = append(warnings, w) }}
	cases := []struct {
		arg, want string
		warned    bool
	}{
		{"svc", "/v1, Resource=services", false},
		{"no", "/v1, Resource=nodes", false},
		{"wd", "example.com/v1, Resource=widgets", false},
		{"po", "/v1, Resource=pods", true},
		{"pod", "/v1, Resource=pods", false},
		{"gadget", "example.com/v1beta1, Resource=gadgets", false},
	}
	for _, c := range cases {
		warnings = nil
		got, err := m.ResourceFor(schema.GroupVersionResource{Resource: c.arg})
		if err != nil || got.String() != c.want {
			t.Errorf("%s: got %v, %v; want %s", c.arg, got, err, c.want)
		}
		if (len(warnings) > 0) != c.warned {
			t.Errorf("%s: warnings %q", c.arg, warnings)
		}
	}
}

func TestHandlerSkipsRelistsAndHandlesTombstones(t *testing.T) {
	var out strings.Builder
	p := &printer{out: &out}
	target := Target{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	h := handler(target, p)
	a := obj(t, `metadata: {name: w, namespace: ns1, resourceVersion: "5"}`)
	b := obj(t, `metadata: {name: w, namespace: ns1, resourceVersion: "6", labels: {size: big}}`)
	h.OnAdd(a, true)
	h.OnUpdate(a, a.DeepCopy()) // a relist: same resourceVersion
	h.OnUpdate(a, b)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns1/w", Obj: b})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns1/gone"})
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		got = append(got, strings.Join(strings.Fields(l)[1:], " "))
	}
	want := []string{
		"ADDED Widget ns1/w rv=5",
		"MODIFIED Widget ns1/w rv=6 labels=size=big",
		"DELETED Widget ns1/w rv=6 labels=size=big",
		"DELETED Widget ns1/gone rv=",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
