package xds

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
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
func (m *servedModel) get(t testing.TB, typeURL string, c translate.Client, name string) proto.Message {
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

func (m *servedModel) listener(t testing.TB, c translate.Client, name string) *listener.Listener {
	t.Helper()
	r, _ := m.get(t, resource.ListenerType, c, name).(*listener.Listener)
	return r
}

func (m *servedModel) route(t testing.TB, name string) *route.RouteConfiguration {
	t.Helper()
	r, _ := m.get(t, resource.RouteType, translate.Client{}, name).(*route.RouteConfiguration)
	return r
}

func (m *servedModel) cluster(t testing.TB, name string) *cluster.Cluster {
	t.Helper()
	r, _ := m.get(t, resource.ClusterType, translate.Client{}, name).(*cluster.Cluster)
	return r
}

func (m *servedModel) endpoints(t testing.TB, c translate.Client, name string) *endpoint.ClusterLoadAssignment {
	t.Helper()
	r, _ := m.get(t, resource.EndpointType, c, name).(*endpoint.ClusterLoadAssignment)
	return r
}
