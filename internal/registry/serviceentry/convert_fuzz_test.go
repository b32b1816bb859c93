package serviceentry

import (
	"strings"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/configstatus/statustest"
	"github.com/meshpilot/meshpilot/internal/model"
)

// FuzzConvertServiceEntry decodes a spec as the informers do (Istio's own
// JSON decoding) into a ServiceEntry and into a WorkloadEntry of a
// namespace, converts each, and gives the workload's endpoint for every
// port of the entry. Whatever the bytes: nothing panics; the verdict is
// the same every time; a refused entry is nil and its status names a
// field of the spec and why; an applied entry has one service per host
// served, each with ports in range and unique names whose cluster names
// read back as written, and endpoints with an address and a port in
// range.
func FuzzConvertServiceEntry(f *testing.F) {
	for _, s := range []string{
		`{"hosts":["payments.example.com"],"location":"MESH_EXTERNAL","resolution":"DNS","ports":[{"number":443,"protocol":"TLS","name":"tls"}]}`,
		`{"hosts":["api.internal.example","*.example.net"],"addresses":["240.0.0.1","10.1.0.0/16"],"resolution":"STATIC",
		  "ports":[{"number":9080,"protocol":"GRPC","name":"grpc","targetPort":8080}],
		  "endpoints":[{"address":"192.0.2.30","ports":{"grpc":9080},"labels":{"app":"reviews"},"locality":"region1/zone1","weight":3},
		               {"address":"192.0.2.31","network":"n1","serviceAccount":"reviews"}],"exportTo":["."],"subjectAltNames":["spiffe://x"]}`,
		`{"hosts":["vm.example.com"],"resolution":"STATIC","ports":[{"number":7070,"protocol":"GRPC","name":"grpc"}],"workloadSelector":{"labels":{"app":"vm"}}}`,
		`{"hosts":["db.example.com"],"resolution":"DNS_ROUND_ROBIN","ports":[{"number":5432,"protocol":"TCP","name":"pg"}],"endpoints":[{"address":"db1.example.com"}]}`,
		`{"hosts":["passthrough.example.com"],"resolution":"NONE","ports":[{"number":80,"protocol":"HTTP","name":"http"}],"endpoints":[{"address":"192.0.2.1"}]}`,
		`{"address":"192.0.2.30","ports":{"grpc":9080},"labels":{"app":"reviews","version":"v3"},"locality":"region1/zone1/sub","weight":1,"serviceAccount":"reviews"}`,
		`{"address":"vm-1.example.com","ports":{"grpc":0}}`,
		`{"hosts":["*"],"ports":[{"number":0,"name":"x"}]}`,
		`{"hosts":["short"],"ports":[{"number":70000,"protocol":"GRPC","name":"grpc","targetPort":70000}]}`,
		`{"hosts":["a.example.com","A.example.com"],"ports":[{"number":80,"protocol":"HTTP","name":"a"},{"number":80,"protocol":"HTTP","name":"a"}],
		  "endpoints":[{"address":"not an address"},{"address":"unix:///sock"}],"addresses":["x/33"]}`,
		`{"hosts":["a.example.com"],"resolution":"STATIC","ports":[{"number":80,"protocol":"HTTP","name":"a"}],"endpoints":[{"address":"192.0.2.1","ports":{"b":80}}],"workloadSelector":{}}`,
	} {
		f.Add("ns", []byte(s))
	}
	f.Add("", []byte(`{"hosts":["a.example.com"],"ports":[{"number":80,"protocol":"HTTP","name":"a"}]}`))
	f.Fuzz(func(t *testing.T, namespace string, spec []byte) {
		se := &networkingv1.ServiceEntry{}
		se.Name, se.Namespace = "fuzzed", namespace
		var e *entry
		if err := se.Spec.UnmarshalJSON(spec); err == nil {
			var st configstatus.Status
			e, st = convertServiceEntry(se, "")
			again, st2 := convertServiceEntry(se, "")
			if !st.Equal(st2) || (e == nil) != (again == nil) {
				t.Fatalf("two conversions disagree: %+v then %+v", st, st2)
			}
			statustest.Check(t, st, e != nil)
			if e != nil {
				checkEntry(t, e)
			}
		}

		we := &networkingv1.WorkloadEntry{}
		if err := we.Spec.UnmarshalJSON(spec); err != nil {
			return
		}
		w, bad := convertWorkload(&we.Spec, namespace, "spec")
		if bad != nil {
			statustest.Check(t, configstatus.Status{Refused: bad}, w != nil)
			return
		}
		if e == nil {
			return
		}
		for _, svc := range e.services {
			for _, p := range svc.Ports {
				for _, ep := range []*model.Endpoint{w.endpoint(p), w.kubernetesEndpoint(p)} {
					if ep != nil {
						checkEndpoint(t, ep)
					}
				}
			}
		}
	})
}

func checkEntry(t *testing.T, e *entry) {
	t.Helper()
	if len(e.services) != len(e.hostPaths) {
		t.Fatalf("%d services, %d host paths", len(e.services), len(e.hostPaths))
	}
	hosts := map[string]bool{}
	for _, svc := range e.services {
		h := strings.ToLower(string(svc.Hostname))
		if h == "" || hosts[h] {
			t.Fatalf("host %q: empty or twice", svc.Hostname)
		}
		hosts[h] = true
		names := map[string]bool{}
		for _, p := range svc.Ports {
			if p.Port < 1 || p.Port > 65535 || p.TargetPort < 1 || p.TargetPort > 65535 || p.Name == "" || names[p.Name] {
				t.Fatalf("%s: port %+v", svc.Hostname, p)
			}
			names[p.Name] = true
			name := model.ClusterName(p.Port, "", svc.Hostname)
			want := model.ClusterKey{Port: p.Port, Host: svc.Hostname}
			if got, ok := model.ParseClusterName(name); !ok || got != want {
				t.Fatalf("the cluster %q reads as %+v, %v", name, got, ok)
			}
		}
	}
	for _, ep := range e.endpoints {
		checkEndpoint(t, ep)
	}
}

func checkEndpoint(t *testing.T, ep *model.Endpoint) {
	t.Helper()
	if ep.Address == "" || ep.Port < 1 || ep.Port > 65535 || ep.ServicePortName == "" {
		t.Fatalf("endpoint %+v", ep)
	}
}
