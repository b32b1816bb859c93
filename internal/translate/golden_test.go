package translate

import (
	"cmp"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/golden"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/modelcase"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/serviceentry"
	"github.com/meshpilot/meshpilot/internal/translate/translatetest"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// goldenInput is the YAML format of testdata/in: a model and the clients
// that ask for resources from it.
type goldenInput = modelcase.Input

// goldenRootNamespace is the root namespace of golden cases, Istio's
// default.
const goldenRootNamespace = "istio-system"

// loadPolicies converts a golden input's DestinationRules; nil without
// any, as a server without the Istio source has none.
func loadPolicies(t testing.TB, in *goldenInput, suffix string) model.PolicyIndex {
	t.Helper()
	if len(in.DestinationRules) == 0 {
		return nil
	}
	return model.NewStaticPolicies(goldenRootNamespace, goldenRules(t, in, suffix))
}

func goldenRules(t testing.TB, in *goldenInput, suffix string) []*model.DestinationRule {
	t.Helper()
	var rules []*model.DestinationRule
	for _, dr := range in.DestinationRules {
		r, status := crd.ConvertDestinationRule(dr, suffix)
		if r == nil {
			t.Logf("DestinationRule %s/%s is refused: %s: %s", dr.Namespace, dr.Name, status.Refused.Path, status.Refused.Why)
			continue
		}
		rules = append(rules, r)
	}
	return rules
}

// loadRoutes converts a golden input's VirtualServices, checking their
// subsets against its DestinationRules; nil without any. A refused one
// fails the case: golden inputs show what is applied.
func loadRoutes(t testing.TB, in *goldenInput, suffix string) model.RouteIndex {
	t.Helper()
	if len(in.VirtualServices) == 0 && len(in.HTTPRoutes) == 0 && len(in.GRPCRoutes) == 0 {
		return nil
	}
	rules := goldenRules(t, in, suffix)
	defined := func(h model.Hostname, subset string) bool {
		for _, r := range rules {
			if r.Host == h && r.Subset(subset) != nil {
				return true
			}
		}
		return false
	}
	var vss []*model.VirtualService
	for _, obj := range in.VirtualServices {
		vs, status := crd.ConvertVirtualService(obj, crd.ConvertOptions{DomainSuffix: suffix, SubsetDefined: defined})
		if status.Refused != nil {
			t.Fatalf("VirtualService %s/%s is refused: %s: %s", obj.Namespace, obj.Name, status.Refused.Path, status.Refused.Why)
		}
		if vs != nil {
			vss = append(vss, vs)
		}
	}
	return model.NewStaticRoutes(append(vss, goldenGatewayRoutes(t, in, suffix)...))
}

// loadSecurity indexes a golden input's security policies; nil without
// any, as a server without the Istio source has none.
func loadSecurity(t testing.TB, in *goldenInput) model.SecurityIndex {
	t.Helper()
	peer, authz, err := in.Security()
	if err != nil {
		t.Fatal(err)
	}
	if len(peer)+len(authz) == 0 {
		return nil
	}
	s := &translatetest.Security{}
	s.Set(goldenRootNamespace, peer, authz)
	return s
}

func clientNode(t testing.TB, c modelcase.Client) *core.Node {
	t.Helper()
	n, err := c.Node()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// loadModel builds the model of a golden input: one store per source,
// served through their aggregate when there are several.
func loadModel(t testing.TB, in *goldenInput, suffix string) model.ServiceDiscovery {
	t.Helper()
	var sources []aggregate.Source
	stores := map[string]*model.Store{}
	for _, s := range in.Services {
		st := stores[s.Source]
		if st == nil {
			st = model.NewStore()
			stores[s.Source] = st
			sources = append(sources, aggregate.Source{Name: cmp.Or(s.Source, "model"), Controller: st})
		}
		svc := &model.Service{
			Hostname:     model.ServiceHostname(s.Name, s.Namespace, suffix),
			Name:         s.Name,
			Namespace:    s.Namespace,
			Ports:        s.Ports,
			ClusterIPs:   s.ClusterIPs,
			ExternalName: s.ExternalName,
			Selector:     s.Selector,
			ExportTo:     s.ExportTo,
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
				Labels: e.Labels, ServiceAccount: e.ServiceAccount, PodName: e.Pod, ClusterID: e.Cluster,
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
	if len(in.ServiceEntries)+len(in.WorkloadEntries) > 0 {
		var kube serviceentry.Services
		if len(sources) > 0 {
			kube = sources[0].Controller
		}
		reg := serviceentry.New(&goldenIstioStore{in: in}, serviceentry.Options{DomainSuffix: suffix, Services: kube})
		// With its context ended, Run reads what the store holds and
		// returns.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := reg.Run(ctx); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, aggregate.Source{Name: "serviceentries", Controller: reg})
	}
	if len(sources) == 1 {
		return sources[0].Controller
	}
	a, err := aggregate.New(aggregate.Options{Sources: sources})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// goldenTypes are the types a golden case writes, one output file each.
var goldenTypes = []struct{ file, url string }{
	{"listeners", resource.ListenerType},
	{"routes", resource.RouteType},
	{"clusters", resource.ClusterType},
	{"endpoints", resource.EndpointType},
}

// TestGolden is the main test of the generators: each
// testdata/in/<case>.yaml shows one behaviour (its header says which and
// by what rule) with a model and the clients that ask for resources from
// it. What the generators build for each client goes to
// testdata/out/<case>/<type>.json, one file per xDS type, as
// {client: {name asked: resource, or null when the name designates
// nothing}}; a client that subscribes to everything (wildcard) is there
// with what that gets it, {} when nothing. Resources are asked for as
// the server asks (generatedModel: decoded from their wire form, each
// held to what it varies by) and are validated. -update rewrites the
// outputs and removes those no case makes.
func TestGolden(t *testing.T) {
	cases := &golden.Cases{In: "testdata/in/*.yaml", Out: "testdata/out", Rerun: "go test ./internal/translate -run TestGolden -update"}
	cases.Run(t, func(t *testing.T, name string, raw []byte) {
		in, err := modelcase.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		g := generateWith(GeneratorOptions{
			Discovery: loadModel(t, in, model.DefaultDomainSuffix),
			Policies:  loadPolicies(t, in, model.DefaultDomainSuffix),
			Routes:    loadRoutes(t, in, model.DefaultDomainSuffix),
			Security:  loadSecurity(t, in),
		})
		out := map[string]map[string]map[string]json.RawMessage{} // type -> client -> name -> resource
		for _, c := range in.Clients {
			client := ClientFromNode(clientNode(t, c))
			asked := map[string][]string{
				resource.ListenerType: c.Listeners, resource.RouteType: c.Routes, resource.ClusterType: c.Clusters, resource.EndpointType: c.Endpoints,
			}
			for _, ty := range goldenTypes {
				names := asked[ty.url]
				if c.Wildcard {
					names = append(slices.Clone(names), g.wildcardNames(t, ty.url, client)...)
				} else if len(names) == 0 {
					continue
				}
				if out[ty.file] == nil {
					out[ty.file] = map[string]map[string]json.RawMessage{}
				}
				if out[ty.file][c.Name] != nil {
					t.Fatalf("two clients are called %q", c.Name)
				}
				got := map[string]json.RawMessage{}
				out[ty.file][c.Name] = got
				for _, n := range names {
					m := g.get(t, ty.url, client, n)
					if m == nil {
						got[n] = json.RawMessage("null")
						continue
					}
					if err := Validate(m); err != nil {
						t.Errorf("%s %s %q: %v", c.Name, ty.file, n, err)
					}
					b, err := protojson.Marshal(m)
					if err != nil {
						t.Fatal(err)
					}
					got[n] = b
				}
			}
		}
		for _, ty := range goldenTypes {
			if out[ty.file] == nil {
				continue
			}
			b, err := json.MarshalIndent(out[ty.file], "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			cases.Check(t, filepath.Join(name, ty.file+".json"), append(b, '\n'))
		}
	})
}

// goldenIstioStore is the crd.Store of a golden input's Istio objects: it
// never changes, so it has no events.
type goldenIstioStore struct{ in *goldenInput }

func (s *goldenIstioStore) ServiceEntries() []*networkingv1.ServiceEntry { return s.in.ServiceEntries }
func (s *goldenIstioStore) WorkloadEntries() []*networkingv1.WorkloadEntry {
	return s.in.WorkloadEntries
}
func (s *goldenIstioStore) DestinationRules() []*networkingv1.DestinationRule {
	return s.in.DestinationRules
}
func (s *goldenIstioStore) VirtualServices() []*networkingv1.VirtualService {
	return s.in.VirtualServices
}

func (s *goldenIstioStore) ServiceEntry(ns, name string) *networkingv1.ServiceEntry {
	return named(s.in.ServiceEntries, ns, name)
}

func (s *goldenIstioStore) WorkloadEntry(ns, name string) *networkingv1.WorkloadEntry {
	return named(s.in.WorkloadEntries, ns, name)
}

func (s *goldenIstioStore) DestinationRule(ns, name string) *networkingv1.DestinationRule {
	return named(s.in.DestinationRules, ns, name)
}

func (s *goldenIstioStore) VirtualService(ns, name string) *networkingv1.VirtualService {
	return named(s.in.VirtualServices, ns, name)
}
func (s *goldenIstioStore) AppendEventHandler(crd.EventHandler) {}

func named[T interface {
	GetNamespace() string
	GetName() string
}](objs []T, ns, name string) T {
	for _, o := range objs {
		if o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	var zero T
	return zero
}
