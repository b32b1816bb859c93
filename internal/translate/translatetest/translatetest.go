// Package translatetest holds the fixtures that the tests of the
// generators (internal/translate) and of what serves them (internal/xds)
// share: small services and endpoints, mesh settings a test changes, and
// a model of one service spread over two clusters.
package translatetest

import (
	"slices"
	"sync/atomic"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Service makes a service in namespace ns with one gRPC port.
func Service(name, ns string, port int32) *model.Service {
	return &model.Service{
		Hostname:  model.ServiceHostname(name, ns, ""),
		Name:      name,
		Namespace: ns,
		Ports:     []model.Port{{Name: "grpc", Port: port, Protocol: model.GRPC}},
	}
}

// Endpoints makes an endpoint of the gRPC port per address.
func Endpoints(port uint32, health model.Health, addrs ...string) []*model.Endpoint {
	var out []*model.Endpoint
	for _, a := range addrs {
		out = append(out, &model.Endpoint{Address: a, Port: port, ServicePortName: "grpc", Health: health})
	}
	return out
}

// Mesh is mesh settings a test changes (a model.MeshSource).
type Mesh struct {
	p atomic.Pointer[model.MeshSettings]
}

// Set puts settings in force.
func (m *Mesh) Set(settings *model.MeshSettings) { m.p.Store(settings) }

// Mesh returns the settings in force.
func (m *Mesh) Mesh() *model.MeshSettings { return m.p.Load() }

// MeshWithClusterLocal is the default mesh settings with hosts
// cluster-local (MeshConfig serviceSettings clusterLocal).
func MeshWithClusterLocal(hosts ...model.Hostname) *Mesh {
	m := &Mesh{}
	settings := *model.DefaultMeshSettings()
	if len(hosts) > 0 {
		settings.ServiceSettings = []model.ServiceSettings{{Hosts: hosts, ClusterLocal: true}}
	}
	m.Set(&settings)
	return m
}

// SpreadStore holds "spread" with one endpoint in the local cluster (no
// cluster ID, as the local registry writes it) and one in cluster-b.
func SpreadStore() (*model.Store, *model.Service) {
	st := model.NewStore()
	svc := Service("spread", "default", 80)
	st.Update(svc, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Health: model.Healthy, Namespace: "default",
			PodName: "spread-7d9f8c-abcde", Labels: map[string]string{"app": "spread", "pod-template-hash": "7d9f8c"}},
		{Address: "10.1.0.1", Port: 80, ServicePortName: "grpc", Health: model.Healthy, Namespace: "default",
			PodName: "spread-v2-0", Labels: map[string]string{"app": "spread", "version": "v2"}, ClusterID: "cluster-b"},
	})
	return st, svc
}

// LBEndpoints lists a ClusterLoadAssignment's endpoints as
// "address[=istio.workload]", sorted.
func LBEndpoints(cla *endpoint.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			s := e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			if w := e.GetMetadata().GetFilterMetadata()["istio"].GetFields()["workload"]; w != nil {
				s += "=" + w.GetStringValue()
			}
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Security is a model.SecurityIndex of policies a test sets and changes.
// The zero value holds none, its root namespace Istio's default.
type Security struct {
	p atomic.Pointer[securitySet]
}

type securitySet struct {
	root  string
	peer  []*model.PeerAuthentication
	authz []*model.AuthorizationPolicy
}

// Set puts policies in force, root the mesh's root namespace (Istio's
// default when empty).
func (s *Security) Set(root string, peer []*model.PeerAuthentication, authz []*model.AuthorizationPolicy) {
	if root == "" {
		root = model.DefaultRootNamespace
	}
	s.p.Store(&securitySet{root: root, peer: peer, authz: authz})
}

// SecurityPoliciesFor returns the policies of ns and of the root
// namespace, oldest first, as the model's contract orders them.
func (s *Security) SecurityPoliciesFor(ns string) model.SecurityPolicies {
	set := s.p.Load()
	if set == nil {
		return model.SecurityPolicies{RootNamespace: model.DefaultRootNamespace}
	}
	out := model.SecurityPolicies{RootNamespace: set.root}
	for _, p := range set.peer {
		if p.Namespace == ns || p.Namespace == set.root {
			out.Peer = append(out.Peer, p)
		}
	}
	for _, p := range set.authz {
		if p.Namespace == ns || p.Namespace == set.root {
			out.Authz = append(out.Authz, p)
		}
	}
	slices.SortStableFunc(out.Peer, func(a, b *model.PeerAuthentication) int {
		return model.ComparePolicies(a.Created, a.Namespace, a.Name, b.Created, b.Namespace, b.Name)
	})
	slices.SortStableFunc(out.Authz, func(a, b *model.AuthorizationPolicy) int {
		return model.ComparePolicies(a.Created, a.Namespace, a.Name, b.Created, b.Namespace, b.Name)
	})
	return out
}
