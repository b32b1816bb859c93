package xds

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/meshpilot/meshpilot/internal/model"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/out")

// goldenInput is the YAML format of testdata/in: a model and the clients
// that ask for resources from it.
type goldenInput struct {
	Services []struct {
		Name         string       `json:"name"`
		Namespace    string       `json:"namespace"`
		Resolution   string       `json:"resolution"`
		ExternalName string       `json:"externalName"`
		ClusterIPs   []string     `json:"clusterIPs"`
		Ports        []model.Port `json:"ports"`
		// InternalTrafficPolicy is "Local" or empty; TrafficDistribution
		// "PreferSameZone", "PreferSameNode" or empty.
		InternalTrafficPolicy string `json:"internalTrafficPolicy"`
		TrafficDistribution   string `json:"trafficDistribution"`
		Endpoints             []struct {
			Address  string `json:"address"`
			Port     uint32 `json:"port"`
			PortName string `json:"portName"`
			Locality string `json:"locality"`
			Health   string `json:"health"`
			Node     string `json:"node"`
		} `json:"endpoints"`
	} `json:"services"`
	Clients []goldenClient `json:"clients"`
}

type goldenClient struct {
	Name      string            `json:"name"`
	ID        string            `json:"id"`
	UserAgent string            `json:"userAgent"`
	Metadata  map[string]string `json:"metadata"`
	// Locality is the node's, "region/zone/subzone".
	Locality  string   `json:"locality"`
	Wildcard  bool     `json:"wildcard"`
	Listeners []string `json:"listeners"`
	Routes    []string `json:"routes"`
	Clusters  []string `json:"clusters"`
	Endpoints []string `json:"endpoints"`
}

func (c goldenClient) node(t testing.TB) *core.Node {
	n := &core.Node{Id: c.ID, UserAgentName: c.UserAgent}
	if c.Locality != "" {
		l := model.ParseLocality(c.Locality)
		n.Locality = &core.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.Subzone}
	}
	if len(c.Metadata) > 0 {
		m := map[string]any{}
		for k, v := range c.Metadata {
			m[k] = v
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		n.Metadata = s
	}
	return n
}

// loadModel fills a store from a golden input.
func loadModel(t testing.TB, in *goldenInput, suffix string) *model.Store {
	t.Helper()
	st := model.NewStore()
	for _, s := range in.Services {
		svc := &model.Service{
			Hostname:     model.ServiceHostname(s.Name, s.Namespace, suffix),
			Name:         s.Name,
			Namespace:    s.Namespace,
			Ports:        s.Ports,
			ClusterIPs:   s.ClusterIPs,
			ExternalName: s.ExternalName,
		}
		switch s.Resolution {
		case "", "ClientSideLB":
		case "Passthrough":
			svc.Resolution = model.Passthrough
		case "DNSAlias":
			svc.Resolution = model.DNSAlias
		default:
			t.Fatalf("unknown resolution %q", s.Resolution)
		}
		switch s.InternalTrafficPolicy {
		case "", "Cluster":
		case "Local":
			svc.InternalTrafficPolicy = model.InternalTrafficLocal
		default:
			t.Fatalf("unknown internalTrafficPolicy %q", s.InternalTrafficPolicy)
		}
		switch s.TrafficDistribution {
		case "":
		case "PreferSameZone":
			svc.TrafficDistribution = model.PreferSameZone
		case "PreferSameNode":
			svc.TrafficDistribution = model.PreferSameNode
		default:
			t.Fatalf("unknown trafficDistribution %q", s.TrafficDistribution)
		}
		var eps []*model.Endpoint
		for _, e := range s.Endpoints {
			ep := &model.Endpoint{
				Address: e.Address, Port: e.Port, ServicePortName: e.PortName,
				Locality: model.ParseLocality(e.Locality), Namespace: s.Namespace, NodeName: e.Node,
			}
			switch e.Health {
			case "", "HEALTHY":
			case "DRAINING":
				ep.Health = model.Draining
			case "UNHEALTHY":
				ep.Health = model.Unhealthy
			default:
				t.Fatalf("unknown health %q", e.Health)
			}
			eps = append(eps, ep)
		}
		st.Update(svc, eps)
	}
	return st
}

// goldenTypes are the types a golden case writes, one output file each.
var goldenTypes = []struct{ file, url string }{
	{"listeners", ListenerType},
	{"routes", RouteType},
	{"clusters", ClusterType},
	{"endpoints", EndpointType},
}

// TestGolden: each testdata/in/<case>.yaml holds a model and the clients
// that ask for resources from it; what the server serves each client goes
// to testdata/out/<case>/<type>.json, one file per xDS type, keyed by
// client. Resources come through the server's own path (its resource
// cache and generators, as a request is answered), are validated, and
// compared with the files; -update rewrites them and removes outputs whose
// case or type is gone.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	want := map[string]bool{} // every output file the cases make
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var in goldenInput
			if err := yaml.UnmarshalStrict(raw, &in); err != nil {
				t.Fatal(err)
			}
			g := serve(loadModel(t, &in, model.DefaultDomainSuffix))
			out := map[string]map[string][]json.RawMessage{} // type -> client -> resources
			for _, c := range in.Clients {
				client := ClientFromNode(c.node(t))
				asked := map[string][]string{
					ListenerType: c.Listeners, RouteType: c.Routes, ClusterType: c.Clusters, EndpointType: c.Endpoints,
				}
				for _, ty := range goldenTypes {
					names := asked[ty.url]
					if c.Wildcard && ty.url != ListenerType {
						names = g.allNames(t, ty.url)
					}
					for _, n := range names {
						m := g.get(t, ty.url, client, n)
						if m == nil {
							continue
						}
						if err := Validate(m); err != nil {
							t.Errorf("%s %s %q: %v", c.Name, ty.file, n, err)
						}
						b, err := protojson.Marshal(m)
						if err != nil {
							t.Fatal(err)
						}
						if out[ty.file] == nil {
							out[ty.file] = map[string][]json.RawMessage{}
						}
						out[ty.file][c.Name] = append(out[ty.file][c.Name], b)
					}
				}
			}
			for _, ty := range goldenTypes {
				if out[ty.file] == nil {
					continue
				}
				golden := filepath.Join("testdata", "out", name, ty.file+".json")
				want[golden] = true
				b, err := json.MarshalIndent(out[ty.file], "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				compareGolden(t, golden, append(b, '\n'))
			}
		})
	}
	removeStaleGolden(t, want)
}

// compareGolden compares got with a golden file, or writes it with
// -update.
func compareGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/xds -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from what is served; run go test ./internal/xds -run TestGolden -update and review the diff\n%s", golden, got)
	}
}

// removeStaleGolden: an output no case makes any more is deleted with
// -update, and fails the test otherwise, so that testdata/out says only
// what is served.
func removeStaleGolden(t *testing.T, want map[string]bool) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join("testdata", "out"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || want[path] {
			return err
		}
		if !*update {
			t.Errorf("%s is made by no golden case; run go test ./internal/xds -run TestGolden -update to remove it", path)
			return nil
		}
		return os.Remove(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		// Folders of cases that are gone.
		dirs, _ := os.ReadDir(filepath.Join("testdata", "out"))
		for _, d := range dirs {
			p := filepath.Join("testdata", "out", d.Name())
			if entries, err := os.ReadDir(p); err == nil && len(entries) == 0 {
				_ = os.Remove(p)
			}
		}
	}
}
