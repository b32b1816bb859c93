package file

import (
	"strings"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
)

const goodRule = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
    connectionPool: {http: {http2MaxRequests: 100}, tcp: {connectTimeout: 2s}}
    portLevelSettings:
    - port: {number: 9080}
      loadBalancer: {simple: RANDOM}
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
    trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
`

const goodVirtualService = `apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /reviews.Reviews/}, headers: {x-canary: {exact: "yes"}}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - route:
    - {destination: {host: reviews, subset: v1, port: {number: 9080}}, weight: 80}
    - {destination: {host: reviews, subset: v2}, weight: 20}
    timeout: 1.5s
    retries: {attempts: 3, perTryTimeout: 500ms, retryOn: "unavailable,cancelled"}
    fault: {abort: {grpcStatus: UNAVAILABLE, percentage: {value: 10.5}}}
`

const goodServiceEntry = `apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata: {name: payments}
spec:
  hosts: [payments.example.com]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{number: 443, name: grpc, protocol: GRPC}]
  endpoints: [{address: 192.0.2.20, ports: {grpc: 8443}, labels: {app: payments}, weight: 2}]
`

const goodWorkloadEntry = `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1}
spec:
  address: 192.0.2.30
  ports: {grpc: 9080}
  labels: {app: reviews, version: v3}
  locality: region1/zone1
  weight: 1
  serviceAccount: reviews
`

// Istio's kinds join the parser's tables (parse_test.go), so that
// TestVerdictsAgreeWithTheAPIServer holds them to the API server with
// Istio's CRDs too.
func init() {
	validManifests = append(validManifests,
		validCase{"a DestinationRule", goodRule, []string{"DestinationRule"}},
		validCase{"a VirtualService (v1beta1)", goodVirtualService, []string{"VirtualService"}},
		validCase{"a ServiceEntry (v1alpha3)", goodServiceEntry, []string{"ServiceEntry"}},
		validCase{"a WorkloadEntry", goodWorkloadEntry, []string{"WorkloadEntry"}},
		validCase{"Istio kinds in a v1 List", `{"apiVersion":"v1","kind":"List","items":[
			{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"r","namespace":"default"},
			 "spec":{"host":"r.default.svc.cluster.local","exportTo":["."]}}]}`, []string{"DestinationRule"}},
		validCase{"Istio kinds beside Kubernetes kinds", goodService + "---\n" + goodRule + "---\n" + goodWorkloadEntry,
			[]string{"Service", "DestinationRule", "WorkloadEntry"}},
	)
	invalidManifests = append(invalidManifests,
		invalidCase{"an unknown field deep in a spec", strings.Replace(goodRule, "{simple: RANDOM}", "{simpel: RANDOM}", 1),
			1, 1, "spec.trafficPolicy.portLevelSettings[0].loadBalancer.simpel", "unknown field"},
		invalidCase{"a proto field name", strings.Replace(goodRule, "  host: reviews\n", "  host: reviews\n  export_to: [.]\n", 1),
			1, 1, "spec.export_to", "unknown field"},
		invalidCase{"an unknown field in an Istio object's metadata", strings.Replace(goodRule, "  name: reviews", "  name: reviews\n  lables: {a: b}", 1),
			1, 1, "metadata.lables", "unknown field"},
		invalidCase{"an Istio object in the second document", goodService + "---\n" + strings.Replace(goodRule, "v2}\n", "v2, app: [x]}\n", 1),
			2, 10, "spec.subsets[1].labels.app", "must be a string"},
		invalidCase{"an unknown load balancer", strings.Replace(goodRule, "LEAST_REQUEST", "FASTEST", 1),
			1, 1, "spec.trafficPolicy.loadBalancer.simple", `Unsupported value: "FASTEST"`},
		invalidCase{"an enum by number", strings.Replace(goodRule, "LEAST_REQUEST", "3", 1),
			1, 1, "spec.trafficPolicy.loadBalancer.simple", "Unsupported value"},
		invalidCase{"a word for a number", strings.Replace(goodRule, "http2MaxRequests: 100", "http2MaxRequests: many", 1),
			1, 1, "spec.trafficPolicy.connectionPool.http.http2MaxRequests", "must be an integer"},
		invalidCase{"a number out of range", strings.Replace(goodRule, "http2MaxRequests: 100", "http2MaxRequests: 4294967296", 1),
			1, 1, "spec.trafficPolicy.connectionPool.http.http2MaxRequests", "must be an integer from"},
		invalidCase{"a list where an object belongs", strings.Replace(goodRule, "loadBalancer: {simple: LEAST_REQUEST}", "loadBalancer: [LEAST_REQUEST]", 1),
			1, 1, "spec.trafficPolicy.loadBalancer", "must be an object"},
		invalidCase{"a malformed duration", strings.Replace(goodVirtualService, "timeout: 1.5s", "timeout: 1.5", 1),
			1, 1, "spec.http[1].timeout", "Invalid value"},
		invalidCase{"a duration under 1ms", strings.Replace(goodVirtualService, "perTryTimeout: 500ms", "perTryTimeout: 500us", 1),
			1, 1, "spec.http[1].retries.perTryTimeout", "greater than 1ms"},
		invalidCase{"two members of a oneof", strings.Replace(goodRule, "{simple: LEAST_REQUEST}", "{simple: LEAST_REQUEST, consistentHash: {httpHeaderName: x-user}}", 1),
			1, 1, "spec.trafficPolicy.loadBalancer", "only one of"},
		invalidCase{"a DestinationRule without a host", strings.Replace(goodRule, "  host: reviews\n", "", 1),
			1, 1, "spec.host", "Required"},
		invalidCase{"a subset without a name", strings.Replace(goodRule, "  - name: v1\n", "  - ", 1),
			1, 1, "spec.subsets[0].name", "Required"},
		invalidCase{"a ServiceEntry without hosts", strings.Replace(goodServiceEntry, "  hosts: [payments.example.com]\n", "", 1),
			1, 1, "spec.hosts", "Required"},
		invalidCase{"a ServiceEntry port without a name", strings.Replace(goodServiceEntry, "name: grpc, ", "", 1),
			1, 1, "spec.ports[0].name", "Required"},
		invalidCase{"a WorkloadEntry without a spec", "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: vm}\n",
			1, 1, "spec", "Required"},
		invalidCase{"a route without a host", strings.Replace(goodVirtualService, "{destination: {host: reviews, subset: v2}, weight: 20}", "{destination: {subset: v2}, weight: 20}", 1),
			1, 1, "spec.http[1].route[1].destination.host", "Required"},
		invalidCase{"an Istio object name that is no DNS subdomain", strings.Replace(goodRule, "name: reviews", "name: Reviews_1", 1),
			1, 1, "metadata.name", "subdomain"},
		invalidCase{"an Istio apiVersion Istio does not serve", strings.Replace(goodRule, "networking.istio.io/v1", "networking.istio.io/v2", 1),
			1, 1, "apiVersion", `"networking.istio.io/v1"`},
		invalidCase{"the same rule twice in a file", goodRule + "---\n" + goodRule, 2, 20, "metadata.name", "already defined in document 1"},
	)
	documentedDifferences["the same rule twice in a file"] = documentedDifferences["same object twice in a file"]
}

// TestParseIstioKinds: each kind decodes into the type istio.io/client-go
// serves, in the v1 version and the default namespace, whichever version
// the file names.
func TestParseIstioKinds(t *testing.T) {
	objs, problems := ParseFile("f.yaml", []byte(goodRule+"---\n"+goodVirtualService+"---\n"+goodServiceEntry+"---\n"+goodWorkloadEntry))
	if len(problems) > 0 {
		t.Fatal(describe(problems))
	}
	if len(objs) != 4 {
		t.Fatalf("%d objects, want 4", len(objs))
	}
	dr := objs[0].Obj.(*networkingv1.DestinationRule)
	if dr.APIVersion != "networking.istio.io/v1" || dr.Namespace != "default" || dr.Spec.GetHost() != "reviews" ||
		len(dr.Spec.GetSubsets()) != 2 || dr.Spec.GetSubsets()[1].GetLabels()["version"] != "v2" ||
		dr.Spec.GetTrafficPolicy().GetConnectionPool().GetHttp().GetHttp2MaxRequests() != 100 ||
		dr.Spec.GetTrafficPolicy().GetPortLevelSettings()[0].GetLoadBalancer().GetSimple().String() != "RANDOM" {
		t.Errorf("DestinationRule decoded as %v", dr)
	}
	vs := objs[1].Obj.(*networkingv1.VirtualService)
	if vs.APIVersion != "networking.istio.io/v1" || vs.Spec.GetHttp()[1].GetRoute()[0].GetWeight() != 80 ||
		vs.Spec.GetHttp()[1].GetTimeout().AsDuration().Seconds() != 1.5 || vs.Spec.GetHttp()[0].GetMatch()[0].GetHeaders()["x-canary"].GetExact() != "yes" {
		t.Errorf("VirtualService decoded as %v", vs)
	}
	se := objs[2].Obj.(*networkingv1.ServiceEntry)
	if se.Spec.GetHosts()[0] != "payments.example.com" || se.Spec.GetEndpoints()[0].GetPorts()["grpc"] != 8443 || se.Spec.GetResolution().String() != "STATIC" {
		t.Errorf("ServiceEntry decoded as %v", se)
	}
	we := objs[3].Obj.(*networkingv1.WorkloadEntry)
	if we.Spec.GetAddress() != "192.0.2.30" || we.Spec.GetPorts()["grpc"] != 9080 || we.Spec.GetLocality() != "region1/zone1" {
		t.Errorf("WorkloadEntry decoded as %v", we)
	}
	for i, want := range []int{1, 20, 35, 45} {
		if objs[i].Line != want || objs[i].Document != i+1 {
			t.Errorf("%s at document %d line %d, want document %d line %d", objs[i].Kind, objs[i].Document, objs[i].Line, i+1, want)
		}
	}
}
