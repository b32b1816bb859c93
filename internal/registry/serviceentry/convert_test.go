package serviceentry

import (
	"encoding/json"
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// serviceEntry reads a ServiceEntry's spec written in YAML, in namespace
// "ns".
func serviceEntry(t *testing.T, name, spec string) *networkingv1.ServiceEntry {
	t.Helper()
	se := &networkingv1.ServiceEntry{}
	se.Name, se.Namespace = name, "ns"
	if err := yaml.Unmarshal([]byte(spec), &se.Spec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return se
}

func workloadEntry(t *testing.T, name, spec string) *networkingv1.WorkloadEntry {
	t.Helper()
	we := &networkingv1.WorkloadEntry{}
	we.Name, we.Namespace = name, "ns"
	if err := yaml.Unmarshal([]byte(spec), &we.Spec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return we
}

func TestConvertServiceEntryRefuses(t *testing.T) {
	const ports = "ports: [{number: 80, protocol: GRPC, name: grpc}]\n"
	for _, tc := range []struct {
		name, spec string
		path       string
	}{
		{"no hosts", ports, "spec.hosts"},
		{"a short host", "hosts: [api]\n" + ports, "spec.hosts[0]"},
		{"every host", "hosts: ['*']\n" + ports, "spec.hosts[0]"},
		{"a host that is no DNS name", "hosts: [a.example.com, 'b_c.example.com']\n" + ports, "spec.hosts[1]"},
		{"a host twice", "hosts: [a.example.com, A.example.com]\n" + ports, "spec.hosts[1]"},
		{"a port without number", "hosts: [a.example.com]\nports: [{protocol: GRPC, name: grpc}]", "spec.ports[0].number"},
		{"a port without name", "hosts: [a.example.com]\nports: [{number: 80, protocol: GRPC}]", "spec.ports[0].name"},
		{"two ports of one name", "hosts: [a.example.com]\nports: [{number: 80, protocol: GRPC, name: g}, {number: 81, protocol: GRPC, name: g}]", "spec.ports[1].name"},
		{"two ports of one number", "hosts: [a.example.com]\nports: [{number: 80, protocol: GRPC, name: g}, {number: 80, protocol: HTTP, name: h}]", "spec.ports[1].number"},
		{"an address that is no IP or CIDR", "hosts: [a.example.com]\naddresses: [a.example.com]\n" + ports, "spec.addresses[0]"},
		{"STATIC with a name for an endpoint", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1}, {address: b.example.com}]\n" + ports, "spec.endpoints[1].address"},
		{"an endpoint without address", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{ports: {grpc: 8080}}]\n" + ports, "spec.endpoints[0].address"},
		{"an endpoint port the entry does not have", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, ports: {http: 8080}}]\n" + ports, "spec.endpoints[0].ports.http"},
		{"DNS without endpoints for a wildcard", "hosts: ['*.example.com']\nresolution: DNS\n" + ports, "spec.hosts[0]"},
		{"DNS_ROUND_ROBIN with two endpoints", "hosts: [a.example.com]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a1.example.com}, {address: a2.example.com}]\n" + ports, "spec.endpoints"},
		{"endpoints and a workloadSelector", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1}]\nworkloadSelector: {labels: {app: a}}\n" + ports, "spec.workloadSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st := convertServiceEntry(serviceEntry(t, "se", tc.spec), "")
			if e != nil || st.Refused == nil || st.Refused.Path != tc.path {
				t.Fatalf("status %+v, want refused at %s", st.Refused, tc.path)
			}
		})
	}
}

// TestConvertServiceEntry shows each conversion as the services and
// endpoints it gives, in JSON.
func TestConvertServiceEntry(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       string
		// ignored is the one field reported as served to no client.
		ignored string
	}{
		{
			name: "STATIC with endpoints: one service per host, endpoints mapped by port name, else the target port",
			spec: `
hosts: [a.example.com, b.example.com]
addresses: [240.0.0.1, 240.0.1.0/24]
location: MESH_INTERNAL
resolution: STATIC
exportTo: [".", other]
ports: [{number: 80, protocol: GRPC, name: grpc, targetPort: 8080}, {number: 81, protocol: http, name: web}]
endpoints:
- {address: 10.0.0.1, ports: {grpc: 9090}, labels: {v: "1"}, locality: r/z/s, weight: 3, network: n1, serviceAccount: sa}
- {address: 10.0.0.2}`,
			want: `{"services":[` +
				`{"hostname":"a.example.com","name":"a.example.com","namespace":"ns","ports":[{"name":"grpc","port":80,"targetPort":8080,"protocol":"GRPC"},{"name":"web","port":81,"targetPort":81,"protocol":"HTTP"}],"resolution":"ClientSideLB","clusterIPs":["240.0.0.1","240.0.1.0/24"],"exportTo":[".","other"]},` +
				`{"hostname":"b.example.com","name":"b.example.com","namespace":"ns","ports":[{"name":"grpc","port":80,"targetPort":8080,"protocol":"GRPC"},{"name":"web","port":81,"targetPort":81,"protocol":"HTTP"}],"resolution":"ClientSideLB","clusterIPs":["240.0.0.1","240.0.1.0/24"],"exportTo":[".","other"]}],` +
				`"endpoints":[` +
				`{"address":"10.0.0.1","port":9090,"servicePortName":"grpc","labels":{"topology.istio.io/cluster":"Kubernetes","topology.istio.io/network":"n1","topology.istio.io/subzone":"s","topology.kubernetes.io/region":"r","topology.kubernetes.io/zone":"z","v":"1"},"locality":{"region":"r","zone":"z","subzone":"s"},"health":"HEALTHY","namespace":"ns","serviceAccount":"sa","weight":3,"network":"n1"},` +
				`{"address":"10.0.0.1","port":81,"servicePortName":"web","labels":{"topology.istio.io/cluster":"Kubernetes","topology.istio.io/network":"n1","topology.istio.io/subzone":"s","topology.kubernetes.io/region":"r","topology.kubernetes.io/zone":"z","v":"1"},"locality":{"region":"r","zone":"z","subzone":"s"},"health":"HEALTHY","namespace":"ns","serviceAccount":"sa","weight":3,"network":"n1"},` +
				`{"address":"10.0.0.2","port":8080,"servicePortName":"grpc","labels":{"topology.istio.io/cluster":"Kubernetes"},"locality":{},"health":"HEALTHY","namespace":"ns"},` +
				`{"address":"10.0.0.2","port":81,"servicePortName":"web","labels":{"topology.istio.io/cluster":"Kubernetes"},"locality":{},"health":"HEALTHY","namespace":"ns"}]}`,
		},
		{
			name: "DNS without endpoints: each host resolves itself; MESH_EXTERNAL by default",
			spec: `
hosts: [api.example.com]
resolution: DNS
ports: [{number: 443, protocol: TLS, name: tls}]`,
			want: `{"services":[{"hostname":"api.example.com","name":"api.example.com","namespace":"ns","ports":[{"name":"tls","port":443,"targetPort":443,"protocol":"TLS"}],"resolution":"DNSAlias","externalName":"api.example.com","meshExternal":true}]}`,
		},
		{
			name: "DNS with endpoints: names are resolved by the client",
			spec: `
hosts: [api.example.com]
location: MESH_INTERNAL
resolution: DNS
ports: [{number: 80, protocol: GRPC, name: grpc}]
endpoints: [{address: us.api.example.com}]`,
			want: `{"services":[{"hostname":"api.example.com","name":"api.example.com","namespace":"ns","ports":[{"name":"grpc","port":80,"targetPort":80,"protocol":"GRPC"}],"resolution":"DNSAlias"}],` +
				`"endpoints":[{"address":"us.api.example.com","port":80,"servicePortName":"grpc","labels":{"topology.istio.io/cluster":"Kubernetes"},"locality":{},"health":"HEALTHY","namespace":"ns"}]}`,
		},
		{
			name: "a wildcard host is reported and not served",
			spec: `
hosts: ['*.example.com', a.example.com]
location: MESH_INTERNAL
resolution: STATIC
ports: [{number: 80, protocol: TCP, name: tcp}]`,
			want:    `{"services":[{"hostname":"a.example.com","name":"a.example.com","namespace":"ns","ports":[{"name":"tcp","port":80,"targetPort":80,"protocol":"TCP"}],"resolution":"ClientSideLB"}]}`,
			ignored: "spec.hosts[0]",
		},
		{
			name: "NONE: no endpoints, reported",
			spec: `
hosts: [a.example.com]
location: MESH_INTERNAL
ports: [{number: 80, protocol: TCP, name: tcp}]`,
			want:    `{"services":[{"hostname":"a.example.com","name":"a.example.com","namespace":"ns","ports":[{"name":"tcp","port":80,"targetPort":80,"protocol":"TCP"}],"resolution":"Passthrough"}]}`,
			ignored: "spec.resolution",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st := convertServiceEntry(serviceEntry(t, "se", tc.spec), "")
			if e == nil {
				t.Fatalf("refused: %+v", st.Refused)
			}
			got, err := json.Marshal(struct {
				Services  any               `json:"services"`
				Endpoints []*model.Endpoint `json:"endpoints,omitempty"`
			}{e.services, e.endpoints})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			var ignored []configstatus.Field
			if tc.ignored != "" {
				ignored = []configstatus.Field{{Path: tc.ignored}}
			}
			if !samePaths(st.IgnoredGRPC, ignored) || !samePaths(st.IgnoredEnvoy, ignored) {
				t.Errorf("ignored: gRPC %+v, Envoy %+v; want %s", st.IgnoredGRPC, st.IgnoredEnvoy, tc.ignored)
			}
		})
	}
}

func samePaths(got, want []configstatus.Field) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Path != want[i].Path || got[i].Why == "" {
			return false
		}
	}
	return true
}

func TestConvertWorkloadEntry(t *testing.T) {
	for _, tc := range []struct {
		name, spec, refused string
	}{
		{"an IP", "address: 10.0.0.1\nports: {grpc: 8080}", ""},
		{"a DNS name", "address: vm1.example.com", ""},
		{"no address", "ports: {grpc: 8080}", "spec.address"},
		{"a Unix socket", "address: unix:///var/run/app.sock", "spec.address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			we := workloadEntry(t, "we", tc.spec)
			_, bad := convertWorkload(&we.Spec, we.Namespace, "spec")
			if (bad == nil) != (tc.refused == "") || (bad != nil && bad.Path != tc.refused) {
				t.Fatalf("refused %+v, want %q", bad, tc.refused)
			}
		})
	}
}
