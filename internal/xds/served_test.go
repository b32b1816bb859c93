package xds

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// servedModel answers for one client exactly as the server answers a
// request: through the server's resource cache and generators, so that
// what a test checks is what is served.
// servedModel asks a Server for resources as its clients would, and
// like them holds what it gets: the cache keeps a resource only while
// some client holds it.
type servedModel struct {
	s    *Server
	held []*entry
}

func serve(d model.ServiceDiscovery) *servedModel {
	return &servedModel{s: NewServer(Options{Discovery: d})}
}

// get returns the resource of a type called name for a client, decoded,
// or nil when there is none.
func (m *servedModel) get(t testing.TB, typeURL string, c Client, name string) proto.Message {
	t.Helper()
	typ, ok := m.s.typeOf(typeURL)
	if !ok {
		t.Fatalf("type %s is not served", typeURL)
	}
	m.s.mu.Lock()
	e := m.s.resource(typ, &c, name, nil)
	m.s.mu.Unlock()
	if !e.exists() {
		return nil
	}
	m.held = append(m.held, e)
	msg, err := e.any.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// allNames lists what a wildcard subscription of the type gets.
func (m *servedModel) allNames(t testing.TB, typeURL string) []string {
	t.Helper()
	typ, ok := m.s.typeOf(typeURL)
	if !ok {
		t.Fatalf("type %s is not served", typeURL)
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.cache.gens[typ].AllNames()
}

func (m *servedModel) listener(t testing.TB, c Client, name string) *listener.Listener {
	t.Helper()
	r, _ := m.get(t, resource.ListenerType, c, name).(*listener.Listener)
	return r
}

func (m *servedModel) route(t testing.TB, name string) *route.RouteConfiguration {
	t.Helper()
	r, _ := m.get(t, resource.RouteType, Client{}, name).(*route.RouteConfiguration)
	return r
}

func (m *servedModel) cluster(t testing.TB, name string) *cluster.Cluster {
	t.Helper()
	r, _ := m.get(t, resource.ClusterType, Client{}, name).(*cluster.Cluster)
	return r
}

func (m *servedModel) endpoints(t testing.TB, c Client, name string) *endpoint.ClusterLoadAssignment {
	t.Helper()
	r, _ := m.get(t, resource.EndpointType, c, name).(*endpoint.ClusterLoadAssignment)
	return r
}

// wildcardNames lists what a wildcard subscription of the type gets the
// client: nothing for a gRPC client or a type without a wildcard (see
// isWildcard).
func (m *servedModel) wildcardNames(t testing.TB, typeURL string, c Client) []string {
	t.Helper()
	typ, ok := m.s.typeOf(typeURL)
	if !ok {
		t.Fatalf("type %s is not served", typeURL)
	}
	if !isWildcard(m.s.types[typ], &c, true) {
		return nil
	}
	return m.allNames(t, typeURL)
}
