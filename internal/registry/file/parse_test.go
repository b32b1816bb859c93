package file

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

const goodService = `apiVersion: v1
kind: Service
metadata:
  name: echo
spec:
  ports:
  - name: grpc
    port: 7070
`

const goodSlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-1
  labels: {kubernetes.io/service-name: echo}
addressType: IPv4
ports: [{name: grpc, port: 8080}]
endpoints:
- addresses: [192.0.2.11]
  conditions: {ready: true}
`

// podSpec is the least a Pod needs for the API server to accept it.
const podSpec = "{containers: [{name: app, image: app}]}"

// validCase is a file the registry accepts, holding objects of kinds.
type validCase struct {
	name  string
	data  string
	kinds []string
}

// validManifests are files the registry accepts; a cluster accepts each
// too, but for the differences TestVerdictsAgreeWithTheAPIServer lists.
var validManifests = []validCase{
	{"one document", goodService, []string{"Service"}},
	{"several documents, separators with comments and a leading ---",
		"---\n# a comment\n" + goodService + "--- # next\n" + goodSlice + "---\n\n# only a comment\n",
		[]string{"Service", "EndpointSlice"}},
	{"JSON", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"a"}}}`, []string{"Node"}},
	{"v1 List", `{"apiVersion":"v1","kind":"List","items":[
		{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}},
		{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"shop"},
		 "spec":{"containers":[{"name":"app","image":"app"}]},"status":{"podIP":"10.0.0.1"}}]}`,
		[]string{"Namespace", "Pod"}},
	{"empty file", "", nil},
	{"only comments", "# nothing yet\n---\n", nil},
	{"headless and ExternalName services", `apiVersion: v1
kind: Service
metadata: {name: headless}
spec:
  clusterIP: None
  ports: [{name: http, port: 80, targetPort: http-web}]
---
apiVersion: v1
kind: Service
metadata: {name: alias}
spec: {type: ExternalName, externalName: example.com.}
`, []string{"Service", "Service"}},
	{"loopback endpoints are allowed", strings.Replace(goodSlice, "192.0.2.11", "127.0.0.11", 1), []string{"EndpointSlice"}},
	{"a Pod without containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus: {podIP: 10.0.0.1}\n", []string{"Pod"}},
	{"a Pod with its status", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: a}}\nspec: {nodeName: n1, serviceAccountName: sa, containers: [{name: app, image: app}]}\n" +
		"status: {phase: Running, podIP: 10.0.0.1, podIPs: [{ip: 10.0.0.1}, {ip: \"2001:db8::1\"}], conditions: [{type: Ready, status: \"True\"}]}\n", []string{"Pod"}},
	{"a Service name that starts with a digit", "apiVersion: v1\nkind: Service\nmetadata: {name: 1echo}\nspec: {ports: [{port: 80}]}\n", []string{"Service"}},
	{"a headless Service without ports", "apiVersion: v1\nkind: Service\nmetadata: {name: h}\nspec: {clusterIP: None}\n", []string{"Service"}},
	{"traffic policies", goodService + "  internalTrafficPolicy: Local\n  trafficDistribution: PreferSameZone\n---\n" +
		strings.Replace(goodService, "name: echo", "name: near", 1) + "  internalTrafficPolicy: Cluster\n  trafficDistribution: PreferSameNode\n---\n" +
		strings.Replace(goodService, "name: echo", "name: close", 1) + "  trafficDistribution: PreferClose\n---\n" +
		"apiVersion: v1\nkind: Service\nmetadata: {name: alias}\nspec: {type: ExternalName, externalName: example.com, internalTrafficPolicy: Local, trafficDistribution: PreferSameZone}\n",
		[]string{"Service", "Service", "Service", "Service"}},
	{"a value of a field the registry does not read", goodService + "  sessionAffinity: Sometimes\n", []string{"Service"}},
	{"a targetRef to no Pod", goodSlice + "  targetRef: {kind: Pod, name: Not_A_Pod, namespace: elsewhere}\n", []string{"EndpointSlice"}},
	{"a slice with every field the registry reads", `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-2, labels: {kubernetes.io/service-name: echo}}
addressType: IPv6
ports: [{name: grpc, port: 8080, protocol: TCP, appProtocol: grpc}, {name: dns, port: 53, protocol: UDP}]
endpoints:
- addresses: ["2001:db8::1"]
  conditions: {ready: false, serving: true, terminating: true}
  hostname: echo-0
  nodeName: n1
  zone: z1
  targetRef: {kind: Pod, name: p}
`, []string{"EndpointSlice"}},
}

func TestParseFileAcceptsValidManifests(t *testing.T) {
	for _, tc := range validManifests {
		t.Run(tc.name, func(t *testing.T) {
			objs, problems := ParseFile("f.yaml", []byte(tc.data))
			if len(problems) > 0 {
				t.Fatalf("unexpected problems: %v", problems)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Fatalf("kinds %v, want %v", kinds, tc.kinds)
			}
		})
	}
}

func TestParseFileDefaultsNamespace(t *testing.T) {
	objs, problems := ParseFile("f.yaml", []byte(goodService+"---\n"+goodSlice))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if svc := objs[0].Obj.(*corev1.Service); svc.Namespace != "default" || objs[0].Namespace != "default" {
		t.Fatalf("service namespace %q, want default", svc.Namespace)
	}
	if s := objs[1].Obj.(*discoveryv1.EndpointSlice); s.Namespace != "default" {
		t.Fatalf("slice namespace %q, want default", s.Namespace)
	}
	nodes, problems := ParseFile("n.yaml", []byte("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if nodes[0].Namespace != "" {
		t.Fatalf("a Node got namespace %q", nodes[0].Namespace)
	}
}

// invalidCase is a broken file and where the registry must say the
// problem is.
type invalidCase struct {
	name     string
	data     string
	document int
	line     int
	field    string
	message  string
}

// invalidManifests are files the registry refuses; a cluster refuses each
// too, but for the differences TestVerdictsAgreeWithTheAPIServer lists.
var invalidManifests = []invalidCase{
	{"YAML booleans where a string belongs", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n", 1, 1, "metadata.name", "quote the value"},
	{"bad YAML", goodService + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [x\n", 2, 10, "", "not valid YAML"},
	{"YAML line numbers count from the file's start", goodService + "---\nkind: Service\n  bad: indentation\n", 2, 10, "", "line 11"},
	{"not an object", "- a\n- b\n", 1, 1, "", "must be an object"},
	{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n", 1, 1, "kind", `"ConfigMap"`},
	{"missing kind", "apiVersion: v1\nmetadata: {name: d}\n", 1, 1, "kind", "Required"},
	{"wrong apiVersion", "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: s}\n", 1, 1, "apiVersion", "discovery.k8s.io/v1"},
	{"missing name", "apiVersion: v1\nkind: Service\nmetadata: {}\nspec: {ports: [{port: 80}]}\n", 1, 1, "metadata.name", "Required"},
	{"service name not a DNS label", "apiVersion: v1\nkind: Service\nmetadata: {name: Echo}\nspec: {ports: [{port: 80}]}\n", 1, 1, "metadata.name", "RFC 1123"},
	{"pod name not a DNS subdomain", "apiVersion: v1\nkind: Pod\nmetadata: {name: Pod_1}\nspec: " + podSpec + "\n", 1, 1, "metadata.name", "subdomain"},
	{"namespace name not a DNS label", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n", 1, 1, "metadata.name", "dots"},
	{"bad namespace", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: No_Such}\nspec: " + podSpec + "\n", 1, 1, "metadata.namespace", "label"},
	{"bad label", "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {\"a b\": x}}\n", 1, 1, "metadata.labels", "name part"},
	{"port out of range", goodService + "---\n" + strings.Replace(goodService, "7070", "70000", 1), 2, 10, "spec.ports[0].port", "between 1 and 65535"},
	{"port zero", strings.Replace(goodService, "7070", "0", 1), 1, 1, "spec.ports[0].port", "between 1 and 65535"},
	{"port of the wrong type", strings.Replace(goodService, "7070", "seventy", 1), 1, 1, "spec.ports.port", "must be of type int32"},
	{"quoted target port", goodService + "    targetPort: \"8080\"\n", 1, 1, "spec.ports[0].targetPort", "must not be quoted"},
	{"bad target port name", goodService + "    targetPort: -web\n", 1, 1, "spec.ports[0].targetPort", ""},
	{"unknown protocol", goodService + "    protocol: HTTP\n", 1, 1, "spec.ports[0].protocol", "Unsupported value"},
	{"bad appProtocol", goodService + "    appProtocol: \"a b\"\n", 1, 1, "spec.ports[0].appProtocol", ""},
	{"duplicate port names", goodService + "  - name: grpc\n    port: 7071\n", 1, 1, "spec.ports[1].name", "Duplicate"},
	{"unnamed port among several", goodService + "  - port: 7071\n", 1, 1, "spec.ports[1].name", "Required"},
	{"no ports", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {}\n", 1, 1, "spec.ports", "Required"},
	{"bad cluster IP", goodService + "  clusterIP: 10.0.0.300\n", 1, 1, "spec.clusterIP", "valid IP"},
	{"bad selector", goodService + "  selector: {\"app/x/y\": a}\n", 1, 1, "spec.selector", ""},
	{"bad service type", goodService + "  type: Magic\n", 1, 1, "spec.type", "Unsupported value"},
	{"unknown internalTrafficPolicy", goodService + "  internalTrafficPolicy: Node\n", 1, 1, "spec.internalTrafficPolicy", "Unsupported value"},
	{"internalTrafficPolicy in lower case", goodService + "  internalTrafficPolicy: local\n", 1, 1, "spec.internalTrafficPolicy", "Unsupported value"},
	{"unknown trafficDistribution", goodService + "  trafficDistribution: PreferSameRack\n", 1, 1, "spec.trafficDistribution", "Unsupported value"},
	{"trafficDistribution in lower case", goodService + "  trafficDistribution: prefersamezone\n", 1, 1, "spec.trafficDistribution", "Unsupported value"},
	{"ExternalName without a name", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ExternalName}\n", 1, 1, "spec.externalName", "Required"},
	{"unknown field", strings.Replace(goodService, "ports:", "prots:", 1), 1, 1, "spec.prots", "unknown field"},
	{"duplicate key", goodService + "  ports: []\n", 1, 1, "", "line 9: key \"ports\" already set"},
	{"slice without a service label", strings.Replace(goodSlice, "labels: {kubernetes.io/service-name: echo}", "labels: {}", 1), 1, 1,
		"metadata.labels[kubernetes.io/service-name]", "Required"},
	{"slice without addressType", strings.Replace(goodSlice, "addressType: IPv4\n", "", 1), 1, 1, "addressType", "Required"},
	{"slice with an unknown addressType", strings.Replace(goodSlice, "addressType: IPv4", "addressType: IPv5", 1), 1, 1, "addressType", "Unsupported value"},
	{"endpoint address not an IP", strings.Replace(goodSlice, "192.0.2.11", "192.0.2.300", 1), 1, 1, "endpoints[0].addresses[0]", "valid IP"},
	{"IPv6 address in an IPv4 slice", strings.Replace(goodSlice, "[192.0.2.11]", "[\"2001:db8::1\"]", 1), 1, 1, "endpoints[0].addresses[0]", "IPv4"},
	{"unspecified endpoint address", strings.Replace(goodSlice, "192.0.2.11", "0.0.0.0", 1), 1, 1, "endpoints[0].addresses[0]", "unspecified"},
	{"link-local endpoint address", strings.Replace(goodSlice, "192.0.2.11", "169.254.1.1", 1), 1, 1, "endpoints[0].addresses[0]", "link-local"},
	{"FQDN endpoint address of one label", strings.Replace(strings.Replace(goodSlice, "IPv4", "FQDN", 1), "192.0.2.11", "echo", 1), 1, 1, "endpoints[0].addresses[0]", "two segments"},
	{"endpoint without an address", strings.Replace(goodSlice, "[192.0.2.11]", "[]", 1), 1, 1, "endpoints[0].addresses", "Required"},
	{"slice port out of range", strings.Replace(goodSlice, "port: 8080", "port: 65536", 1), 1, 1, "ports[0].port", "between 1 and 65535"},
	{"slice port protocol", strings.Replace(goodSlice, "port: 8080", "port: 8080, protocol: QUIC", 1), 1, 1, "ports[0].protocol", "Unsupported value"},
	{"pod IP", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + podSpec + "\nstatus: {podIP: 1.2.3}\n", 1, 1, "status.podIP", "valid IP"},
	{"pod phase", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + podSpec + "\nstatus: {phase: Sleeping}\n", 1, 1, "status.phase", "Unsupported value"},
	{"pod node name", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: Node_1, containers: [{name: app, image: app}]}\n", 1, 1, "spec.nodeName", ""},
	{"List item", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"ok"}},{"apiVersion":"v1","kind":"Node","metadata":{}}]}`,
		1, 1, "items[1].metadata.name", "Required"},
	{"same object twice in a file", goodService + "---\n" + goodService, 2, 10, "metadata.name", "already defined in document 1"},
}

// Each broken file must be reported with its file, document index and
// field, so that the user can find the mistake.
func TestParseFileReportsWhereProblemsAre(t *testing.T) {
	for _, tc := range invalidManifests {
		t.Run(tc.name, func(t *testing.T) {
			objs, problems := ParseFile("dir/f.yaml", []byte(tc.data))
			if objs != nil {
				t.Errorf("a broken file gave objects: %v", objs)
			}
			if len(problems) == 0 {
				t.Fatal("no problem reported")
			}
			for _, p := range problems {
				if p.File == "dir/f.yaml" && p.Document == tc.document && p.Line == tc.line && p.Field == tc.field &&
					strings.Contains(p.Message, tc.message) {
					if !strings.HasPrefix(p.Error(), "dir/f.yaml: document ") || (tc.field != "" && !strings.Contains(p.Error(), tc.field)) {
						t.Fatalf("message %q does not name file, document and field", p.Error())
					}
					return
				}
			}
			t.Fatalf("want a problem in document %d (line %d), field %q, containing %q; got:\n%s",
				tc.document, tc.line, tc.field, tc.message, describe(problems))
		})
	}
}

func describe(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Error())
		b.WriteString("\n")
	}
	return b.String()
}

func TestSplitDocumentsKeepsLines(t *testing.T) {
	docs := splitDocuments([]byte("# header\n\n---\na: 1\n---   \n\nb: 2\nc: 3\n...\n---\n# empty\n"))
	if len(docs) != 2 {
		t.Fatalf("got %d documents, want 2", len(docs))
	}
	if docs[0].index != 1 || docs[0].line != 4 || docs[1].index != 2 || docs[1].line != 7 {
		t.Fatalf("documents %+v", docs)
	}
}
