package xds

import (
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// deltaFormOf returns the delta form the cache's entry of a resource
// carries (nil while none was built), failing when the cache has no
// single entry of it.
func deltaFormOf(t testing.TB, s *Server, typeURL, name string) *discovery.Resource {
	t.Helper()
	typ, ok := s.typeOf(typeURL)
	if !ok {
		t.Fatalf("type %s is not served", typeURL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.cache.byName[typ][name]
	if set == nil || set.one == nil || set.one.e.Value() == nil {
		t.Fatalf("%s %s: no single cached entry", typeURL, name)
	}
	return set.one.e.Value().delta
}

// TestDeltaFormOnlyForDeltaClients: state-of-the-world clients leave a
// cache entry without its delta form; the first delta client to be sent
// the entry builds it, and every later delta client is sent that same
// form, as the entry's version says.
func TestDeltaFormOnlyForDeltaClients(t *testing.T) {
	ts := startServer(t, baseStore())
	cc := dial(t, ts.addr)
	sotw := openADS(t, cc, grpcNode("sotw", "default"))
	sotw.Subscribe(resource.EndpointType, reviews)
	sotw.ACK(sotw.Next())
	if d := deltaFormOf(t, ts.Server, resource.EndpointType, reviews); d != nil {
		t.Fatalf("a state-of-the-world client built the delta form %v", d)
	}

	var built *discovery.Resource
	for i, id := range []string{"d1", "d2"} {
		d := openDelta(t, cc, envoyNode(id))
		d.Subscribe(resource.EndpointType, reviews)
		r := d.Next()
		d.ACK(r)
		if len(r.Resources) != 1 || r.Resources[0].Name != reviews {
			t.Fatalf("%s got %+v", id, r.Resources)
		}
		form := deltaFormOf(t, ts.Server, resource.EndpointType, reviews)
		switch {
		case form == nil:
			t.Fatalf("%s was sent %s and the entry has no delta form", id, reviews)
		case form.Name != reviews || form.Version != r.Resources[0].Version || form.Resource == nil:
			t.Fatalf("delta form %v, sent version %s", form, r.Resources[0].Version)
		case i > 0 && form != built:
			t.Fatalf("%s: the delta form was built again", id)
		}
		built = form
	}
}
