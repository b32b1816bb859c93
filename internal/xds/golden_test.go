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
		Endpoints    []struct {
			Address  string `json:"address"`
			Port     uint32 `json:"port"`
			PortName string `json:"portName"`
			Locality string `json:"locality"`
			Health   string `json:"health"`
		} `json:"endpoints"`
	} `json:"services"`
	Clients []goldenClient `json:"clients"`
}

type goldenClient struct {
	Name      string            `json:"name"`
	ID        string            `json:"id"`
	UserAgent string            `json:"userAgent"`
	Metadata  map[string]string `json:"metadata"`
	Wildcard  bool              `json:"wildcard"`
	Listeners []string          `json:"listeners"`
	Routes    []string          `json:"routes"`
	Clusters  []string          `json:"clusters"`
	Endpoints []string          `json:"endpoints"`
}

func (c goldenClient) node(t testing.TB) *core.Node {
	n := &core.Node{Id: c.ID, UserAgentName: c.UserAgent}
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
		var eps []*model.Endpoint
		for _, e := range s.Endpoints {
			ep := &model.Endpoint{
				Address: e.Address, Port: e.Port, ServicePortName: e.PortName,
				Locality: model.ParseLocality(e.Locality), Namespace: s.Namespace,
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

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
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
			g := &Generator{Discovery: storeDiscovery{loadModel(t, &in, model.DefaultDomainSuffix)}}
			out := map[string]map[string][]json.RawMessage{}
			for _, c := range in.Clients {
				client := ClientFromNode(c.node(t))
				got := map[string][]json.RawMessage{}
				types := []struct {
					key, url string
					names    []string
					wildcard []string
				}{
					{"listeners", ListenerType, c.Listeners, nil},
					{"routes", RouteType, c.Routes, nil},
					{"clusters", ClusterType, c.Clusters, g.ClusterNames()},
					{"endpoints", EndpointType, c.Endpoints, g.EndpointNames()},
				}
				for _, ty := range types {
					names := ty.names
					if c.Wildcard {
						names = ty.wildcard
					}
					for _, n := range names {
						m := g.Generate(ty.url, client, n)
						if m == nil {
							continue
						}
						if err := Validate(m); err != nil {
							t.Errorf("%s %s %q: %v", c.Name, ty.key, n, err)
						}
						b, err := protojson.Marshal(m)
						if err != nil {
							t.Fatal(err)
						}
						got[ty.key] = append(got[ty.key], b)
					}
				}
				out[c.Name] = got
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			golden := filepath.Join("testdata", "out", name+".json")
			if *update {
				if err := os.WriteFile(golden, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(want, b) {
				t.Errorf("%s differs from the generated resources; run go test ./internal/xds -run TestGolden -update and review the diff\n%s", golden, b)
			}
		})
	}
}

// storeDiscovery adapts model.Store, which lacks WorkloadByIP, to
// model.ServiceDiscovery.
type storeDiscovery struct{ *model.Store }

func (storeDiscovery) WorkloadByIP(string) *model.Workload { return nil }
