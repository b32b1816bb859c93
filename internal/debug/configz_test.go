package debug

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
)

// TestConfigzObjects pins the JSON of /debug/configz's objects, one
// status of each shape: scripts and `meshpilot status config` read it.
func TestConfigzObjects(t *testing.T) {
	dr := configstatus.Ref{Kind: "DestinationRule", Namespace: "shop", Name: "cart"}
	vs := configstatus.Ref{Kind: "VirtualService", Namespace: "shop", Name: "cart", Where: "rules.yaml:12 (document 2)"}
	for _, tc := range []struct {
		name  string
		entry configstatus.Entry
		want  string
	}{
		{"applied", configstatus.Entry{Ref: dr},
			`{"kind":"DestinationRule","namespace":"shop","name":"cart","state":"applied"}`},
		{"refused, from a file", configstatus.Entry{Ref: vs, Status: configstatus.Refuse("spec.http[0].route", "weights add up to 90, not 100")},
			`{"kind":"VirtualService","namespace":"shop","name":"cart","where":"rules.yaml:12 (document 2)","state":"refused","refused":{"path":"spec.http[0].route","why":"weights add up to 90, not 100"}}`},
		{"ignored for gRPC clients", configstatus.Entry{Ref: vs, Status: configstatus.Status{
			IgnoredGRPC: []configstatus.Field{{Path: "spec.http[1].mirror", Why: "gRPC clients cannot mirror"}}}},
			`{"kind":"VirtualService","namespace":"shop","name":"cart","where":"rules.yaml:12 (document 2)","state":"partial","ignoredForGRPC":[{"path":"spec.http[1].mirror","why":"gRPC clients cannot mirror"}]}`},
		{"ignored for Envoy", configstatus.Entry{Ref: dr, Status: configstatus.Status{
			IgnoredEnvoy: []configstatus.Field{{Path: "spec.trafficPolicy.tls.caCertificates", Why: "no certificate provider"}}}},
			`{"kind":"DestinationRule","namespace":"shop","name":"cart","state":"partial","ignoredForEnvoy":[{"path":"spec.trafficPolicy.tls.caCertificates","why":"no certificate provider"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(ConfigObjects([]configstatus.Entry{tc.entry})[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			var back ConfigObject
			if err := json.Unmarshal(got, &back); err != nil || back.Ref != tc.entry.Ref || !back.Status.Equal(tc.entry.Status) || back.State != tc.entry.State() {
				t.Fatalf("read back %+v, %v; want %+v", back, err, tc.entry)
			}
		})
	}
}

// TestConfigzPage: the page shows the mesh config and the objects of its
// Reporter, and "objects": [] without any.
func TestConfigzPage(t *testing.T) {
	status := configstatus.NewReporter()
	status.Set(configstatus.Ref{Kind: "DestinationRule", Namespace: "shop", Name: "b"}, configstatus.Refuse("spec.host", "wildcard hosts are not served yet"))
	status.Set(configstatus.Ref{Kind: "DestinationRule", Namespace: "shop", Name: "a"}, configstatus.Status{})
	for _, tc := range []struct {
		name    string
		objects func() []configstatus.Entry
		want    []string // "name state" of each object
	}{
		{"no reporter", nil, nil},
		{"a reporter", status.List, []string{"a applied", "b refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			Register(mux, Options{Discovery: model.NewStore(), XDS: fakeXDS{}, Objects: tc.objects})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			code, body := get(t, srv.URL+"/debug/configz")
			var z Configz
			if err := json.Unmarshal(body, &z); code != 200 || err != nil {
				t.Fatalf("configz %d %v: %s", code, err, body)
			}
			if !strings.Contains(string(body), `"objects": [`) || z.MeshConfig.Source == "" {
				t.Fatalf("configz without objects list or mesh config: %s", body)
			}
			var got []string
			for _, o := range z.Objects {
				got = append(got, o.Name+" "+o.State)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("objects %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConfigzServiceConflicts pins the JSON of a port conflict between
// the local cluster's registry and a remote cluster's: each named by its
// cluster, the first served; and "serviceConflicts": [] without any.
func TestConfigzServiceConflicts(t *testing.T) {
	host := model.Hostname("reviews.shop.svc.cluster.local")
	define := func(p model.Port) *model.Store {
		s := model.NewStore()
		s.Update(&model.Service{Hostname: host, Name: "reviews", Namespace: "shop", Ports: []model.Port{p}}, nil)
		return s
	}
	local, remote := define(model.Port{Name: "grpc", Port: 8080, Protocol: model.GRPC}), define(model.Port{Name: "http", Port: 8080, Protocol: model.HTTP})
	agg, err := aggregate.New(aggregate.Options{Sources: []aggregate.Source{
		{Name: aggregate.LocalSource, Controller: local}, {Name: aggregate.RemoteSourcePrefix + "cluster-b", Controller: remote},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		conflicts func() []aggregate.PortConflict
		local     string
		want      string
	}{
		{"no conflicts", nil, "", `[]`},
		{"the default local cluster", agg.PortConflicts, "", `[{"hostname":"reviews.shop.svc.cluster.local","served":"Kubernetes","definedBy":["Kubernetes","cluster-b"],` +
			`"ports":{"Kubernetes":[{"name":"grpc","port":8080,"protocol":"GRPC"}],"cluster-b":[{"name":"http","port":8080,"protocol":"HTTP"}]},` +
			`"why":"ports differ; the first definition, Kubernetes's, is served: port 8080 is named \"grpc\" in Kubernetes, \"http\" in cluster-b: none of cluster-b's endpoints serve it"}]`},
		{"--cluster-id", agg.PortConflicts, "east", `[{"hostname":"reviews.shop.svc.cluster.local","served":"east","definedBy":["east","cluster-b"],` +
			`"ports":{"cluster-b":[{"name":"http","port":8080,"protocol":"HTTP"}],"east":[{"name":"grpc","port":8080,"protocol":"GRPC"}]},` +
			`"why":"ports differ; the first definition, east's, is served: port 8080 is named \"grpc\" in east, \"http\" in cluster-b: none of cluster-b's endpoints serve it"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			Register(mux, Options{Discovery: model.NewStore(), XDS: fakeXDS{}, PortConflicts: tc.conflicts, LocalClusterID: tc.local})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			code, body := get(t, srv.URL+"/debug/configz")
			var z struct {
				ServiceConflicts json.RawMessage `json:"serviceConflicts"`
			}
			if err := json.Unmarshal(body, &z); code != 200 || err != nil {
				t.Fatalf("configz %d %v: %s", code, err, body)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, z.ServiceConflicts); err != nil {
				t.Fatal(err)
			}
			if compact.String() != tc.want {
				t.Fatalf("serviceConflicts\n got %s\nwant %s", compact.String(), tc.want)
			}
		})
	}
}
