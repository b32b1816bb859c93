package translate

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// generatedModel answers for clients as the generators answer the
// server: each resource is generated for the client that asks and
// decoded from its wire form, as a client reads it. The server gives one
// client's result to every client that agrees with it on the facts its
// Vary names, so generatedModel holds each result to that: a client that
// agrees with an earlier one on what either result varies by must get
// the same resource.
type generatedModel struct {
	gens []Generator
	// asked are the results given so far by type URL and name, with the
	// clients they were for.
	asked map[[2]string][]askedResult
}

type askedResult struct {
	client Client
	result Result
}

func generate(d model.ServiceDiscovery) *generatedModel {
	return generateWith(GeneratorOptions{Discovery: d})
}

func generateWith(o GeneratorOptions) *generatedModel {
	return &generatedModel{gens: Generators(o), asked: map[[2]string][]askedResult{}}
}

// generator returns the generator of a type.
func (m *generatedModel) generator(t testing.TB, typeURL string) Generator {
	t.Helper()
	for _, g := range m.gens {
		if g.Type().URL == typeURL {
			return g
		}
	}
	t.Fatalf("type %s is not generated", typeURL)
	return nil
}

// get returns the resource of a type called name for a client, decoded,
// or nil when there is none.
func (m *generatedModel) get(t testing.TB, typeURL string, c Client, name string) proto.Message {
	t.Helper()
	r := m.generator(t, typeURL).Generate(&c, name)
	key := [2]string{typeURL, name}
	for _, prev := range m.asked[key] {
		for _, v := range []Vary{prev.result.Vary, r.Vary} {
			if v.Of(&prev.client) == v.Of(&c) && !proto.Equal(prev.result.Resource, r.Resource) {
				t.Errorf("%s %q: clients %+v and %+v agree on what vary %b names but get different resources", typeURL, name, prev.client, c, v)
			}
		}
	}
	m.asked[key] = append(m.asked[key], askedResult{c, r})
	if r.Resource == nil {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Resource)
	if err != nil {
		t.Fatalf("%s %q: %v", typeURL, name, err)
	}
	msg := r.Resource.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, msg); err != nil {
		t.Fatal(err)
	}
	return msg
}

// allNames lists what a wildcard subscription of the type gets.
func (m *generatedModel) allNames(t testing.TB, typeURL string) []string {
	t.Helper()
	return m.generator(t, typeURL).AllNames()
}

func (m *generatedModel) listener(t testing.TB, c Client, name string) *listener.Listener {
	t.Helper()
	r, _ := m.get(t, resource.ListenerType, c, name).(*listener.Listener)
	return r
}

func (m *generatedModel) cluster(t testing.TB, name string) *cluster.Cluster {
	t.Helper()
	r, _ := m.get(t, resource.ClusterType, Client{}, name).(*cluster.Cluster)
	return r
}

func (m *generatedModel) endpoints(t testing.TB, c Client, name string) *endpoint.ClusterLoadAssignment {
	t.Helper()
	r, _ := m.get(t, resource.EndpointType, c, name).(*endpoint.ClusterLoadAssignment)
	return r
}

// wildcardNames lists what a wildcard subscription of the type gets the
// client: nothing for a gRPC client or a type without a wildcard
// (ResourceType.Wildcard).
func (m *generatedModel) wildcardNames(t testing.TB, typeURL string, c Client) []string {
	t.Helper()
	if !m.generator(t, typeURL).Type().Wildcard || c.GRPC {
		return nil
	}
	return m.allNames(t, typeURL)
}
