package debug

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds"
)

type fakeXDS struct {
	clients []xds.ClientInfo
	dumps   map[string][]xds.ClientConfig
}

func (f fakeXDS) Clients() []xds.ClientInfo                 { return f.clients }
func (f fakeXDS) ConfigDump(node string) []xds.ClientConfig { return f.dumps[node] }

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestPages(t *testing.T) {
	store := model.NewStore()
	host := model.Hostname("a.ns.svc.cluster.local")
	store.Update(&model.Service{Hostname: host, Name: "a", Namespace: "ns", Ports: []model.Port{
		{Name: "grpc", Port: 8080, Protocol: model.GRPC}, {Name: "http", Port: 80, Protocol: model.HTTP},
	}}, []*model.Endpoint{{Address: "10.0.0.1", Port: 9090, ServicePortName: "grpc", Health: model.Draining,
		Locality: model.Locality{Region: "r", Zone: "z"}}})

	c, err := anypb.New(&cluster.Cluster{Name: "outbound|8080||" + string(host)})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	info := xds.ClientInfo{Stream: 3, NodeID: "n1", Connected: at, Types: map[string]*xds.TypeSync{
		"CDS": {Status: xds.Synced, LastSent: &xds.Sent{Version: "v1", Nonce: "1"}, LastACK: &xds.Sent{Version: "v1", Nonce: "1"}},
	}}
	mux := http.NewServeMux()
	Register(mux, Options{Discovery: store, XDS: fakeXDS{
		clients: []xds.ClientInfo{info},
		dumps:   map[string][]xds.ClientConfig{"n1": {{ClientInfo: info, Resources: map[string][]*anypb.Any{"CDS": {c}}}}},
	}})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, body := get(t, srv.URL+"/debug/endpointz")
	var eps []ServiceEndpoints
	if err := json.Unmarshal(body, &eps); code != 200 || err != nil {
		t.Fatalf("endpointz %d %v: %s", code, err, body)
	}
	if len(eps) != 1 || len(eps[0].Ports) != 2 || eps[0].Ports[1].Port != 80 || len(eps[0].Ports[1].Endpoints) != 0 ||
		eps[0].Ports[0].Endpoints[0].Health != model.Draining || eps[0].Ports[0].Endpoints[0].Locality.Zone != "z" {
		t.Fatalf("endpointz %s", body)
	}

	code, body = get(t, srv.URL+"/debug/syncz")
	var sync []SyncStatus
	if err := json.Unmarshal(body, &sync); code != 200 || err != nil || len(sync) != 1 || sync[0].Type != "envoy" ||
		sync[0].Types["CDS"].Status != xds.Synced || sync[0].NodeID != "n1" {
		t.Fatalf("syncz %d %v: %s", code, err, body)
	}

	code, body = get(t, srv.URL+"/debug/config_dump?node=n1")
	var d Dump
	if err := json.Unmarshal(body, &d); code != 200 || err != nil || len(d.Streams) != 1 || d.Streams[0].Types["CDS"].Version != "v1" ||
		len(d.Streams[0].Types["CDS"].Resources) != 1 {
		t.Fatalf("config_dump %d %v: %s", code, err, body)
	}
	var res map[string]any
	if err := json.Unmarshal(d.Streams[0].Types["CDS"].Resources[0], &res); err != nil ||
		res["@type"] != "type.googleapis.com/envoy.config.cluster.v3.Cluster" || res["name"] != "outbound|8080||"+string(host) {
		t.Fatalf("dumped resource %s (%v)", d.Streams[0].Types["CDS"].Resources[0], err)
	}
	for path, want := range map[string]int{
		"/debug/config_dump":         http.StatusBadRequest,
		"/debug/config_dump?node=n2": http.StatusNotFound,
		"/debug/registryz":           http.StatusOK,
		"/debug/pprof/heap":          http.StatusOK,
	} {
		if code, body := get(t, srv.URL+path); code != want {
			t.Errorf("%s: %d, want %d: %s", path, code, want, body)
		}
	}
}

// TestEndpointzShowsEachPortItsOwn: kube-dns's "dns" 53/UDP and "dns-tcp"
// 53/TCP share a number; each row shows its own port's endpoints.
func TestEndpointzShowsEachPortItsOwn(t *testing.T) {
	store := model.NewStore()
	host := model.Hostname("kube-dns.kube-system.svc.cluster.local")
	store.Update(&model.Service{Hostname: host, Name: "kube-dns", Namespace: "kube-system", Ports: []model.Port{
		{Name: "dns", Port: 53, Protocol: model.UDP}, {Name: "dns-tcp", Port: 53, Protocol: model.TCP},
	}}, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 5353, ServicePortName: "dns"},
		{Address: "10.0.0.1", Port: 5354, ServicePortName: "dns-tcp"},
	})
	got := Endpointz(store, "")
	if len(got) != 1 || len(got[0].Ports) != 2 {
		t.Fatalf("Endpointz = %+v", got)
	}
	for i, want := range []uint32{5353, 5354} {
		p := got[0].Ports[i]
		if len(p.Endpoints) != 1 || p.Endpoints[0].Port != want {
			t.Errorf("port %s: endpoints %+v, want one on %d", p.Name, p.Endpoints, want)
		}
	}
}

// TestEndpointzNamesEachEndpointsCluster: an endpoint of a remote
// cluster shows its cluster, one of the local cluster (which the model
// leaves unnamed) the local cluster's ID; the model's endpoints are not
// written.
func TestEndpointzNamesEachEndpointsCluster(t *testing.T) {
	store := model.NewStore()
	host := model.Hostname("api.ns.svc.cluster.local")
	store.Update(&model.Service{Hostname: host, Name: "api", Namespace: "ns", Ports: []model.Port{{Name: "grpc", Port: 8080, Protocol: model.GRPC}}},
		[]*model.Endpoint{
			{Address: "10.0.0.1", Port: 9000, ServicePortName: "grpc"},
			{Address: "10.0.0.2", Port: 9000, ServicePortName: "grpc", ClusterID: "cluster-b"},
		})
	got := Endpointz(store, "east")
	var clusters []string
	for _, ep := range got[0].Ports[0].Endpoints {
		clusters = append(clusters, ep.Address+" "+ep.ClusterID)
	}
	if want := []string{"10.0.0.1 east", "10.0.0.2 cluster-b"}; !slices.Equal(clusters, want) {
		t.Fatalf("endpointz clusters %v, want %v", clusters, want)
	}
	if ep := store.EndpointsByPortName(host, "grpc", nil)[0]; ep.ClusterID != "" {
		t.Fatalf("the model's endpoint was written: %+v", ep)
	}
}

// TestEndpointzShowsEachDefinition: a host two namespaces define shows
// one entry per definition, each with its namespace and its own
// endpoints.
func TestEndpointzShowsEachDefinition(t *testing.T) {
	store := model.NewStore()
	def := func(ns string) *model.Service {
		return &model.Service{Hostname: "api.example.com", Name: "api.example.com", Namespace: ns,
			Ports: []model.Port{{Name: "grpc", Port: 443, Protocol: model.GRPC}}}
	}
	ep := func(addr string) []*model.Endpoint {
		return []*model.Endpoint{{Address: addr, Port: 8443, ServicePortName: "grpc"}}
	}
	store.Update(model.WithDefinitions(def("a"), []model.Definition{{Service: def("b"), Endpoints: ep("10.0.0.2")}}), ep("10.0.0.1"))
	var got []string
	for _, se := range Endpointz(store, "east") {
		for _, p := range se.Ports {
			for _, e := range p.Endpoints {
				got = append(got, se.Namespace+" "+e.Address+" "+e.ClusterID)
			}
		}
	}
	if want := []string{"a 10.0.0.1 east", "b 10.0.0.2 east"}; !slices.Equal(got, want) {
		t.Fatalf("endpointz %v, want %v", got, want)
	}
}
