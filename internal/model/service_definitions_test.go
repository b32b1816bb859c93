package model

import (
	"slices"
	"testing"
)

func TestForNamespaceAsIstiod(t *testing.T) {
	def := func(ns string, exportTo ...string) *Service {
		return &Service{Hostname: "api.example.com", Name: "api.example.com", Namespace: ns, ExportTo: exportTo,
			Ports: []Port{{Name: "grpc", Port: 443, Protocol: GRPC}}}
	}
	cases := []struct {
		name string
		defs []*Service // the oldest first
		want map[string]string
	}{
		{"each namespace its private one",
			[]*Service{def("a", "."), def("b", ".")},
			map[string]string{"a": "a", "b": "b", "c": ""}},
		{"own private before an older public one",
			[]*Service{def("a", "*"), def("b", ".")},
			map[string]string{"a": "a", "b": "b", "c": "a"}},
		{"exportTo naming the namespace before a public one",
			[]*Service{def("a"), def("b", "c")},
			map[string]string{"b": "a", "c": "b"}},
		{"own namespace named in exportTo counts as private",
			[]*Service{def("a", "*"), def("b", "b", "c")},
			map[string]string{"b": "b", "c": "b", "d": "a"}},
		{"the oldest of a kind",
			[]*Service{def("a", "c"), def("b", "c"), def("d", "*"), def("e")},
			map[string]string{"c": "a", "x": "d"}},
		{"exported to none",
			[]*Service{def("a", "~"), def("b", ".")},
			map[string]string{"a": "", "b": "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			others := make([]Definition, 0, len(tc.defs)-1)
			for _, d := range tc.defs[1:] {
				others = append(others, Definition{Service: d, Endpoints: []*Endpoint{{Address: "10.0.0.1", Port: 443, ServicePortName: "grpc", Namespace: d.Namespace}}})
			}
			svc := WithDefinitions(tc.defs[0], others)
			if tc.defs[0].Others != nil {
				t.Fatal("WithDefinitions modified the first definition")
			}
			for ns, want := range tc.want {
				got := svc.ForNamespace(ns)
				switch {
				case want == "" && got != nil:
					t.Errorf("a client of %s gets %s's definition, want none", ns, got.Namespace)
				case want != "" && (got == nil || got.Namespace != want):
					t.Errorf("a client of %s gets %+v, want %s's", ns, got, want)
				}
			}
		})
	}
}

// The endpoints of a definition in Others are its own; the first's are
// the registry's.
func TestEndpointsOfADefinition(t *testing.T) {
	store := NewStore()
	first := &Service{Hostname: "h", Namespace: "a", Ports: []Port{{Name: "grpc", Port: 80, Protocol: GRPC}}}
	second := &Service{Hostname: "h", Namespace: "b", Ports: []Port{{Name: "grpc", Port: 80, Protocol: GRPC}, {Name: "other", Port: 81, Protocol: GRPC}}}
	ep := func(addr, port string, labels Labels) *Endpoint {
		return &Endpoint{Address: addr, Port: 8080, ServicePortName: port, Labels: labels}
	}
	svc := WithDefinitions(first, []Definition{{Service: second, Endpoints: []*Endpoint{
		ep("10.0.0.3", "other", nil), ep("10.0.0.2", "grpc", Labels{"v": "2"}), ep("10.0.0.1", "grpc", Labels{"v": "1"})}}})
	store.Update(svc, []*Endpoint{ep("10.1.0.1", "grpc", nil)})

	addrs := func(eps []*Endpoint) []string {
		var out []string
		for _, e := range eps {
			out = append(out, e.Address)
		}
		return out
	}
	got := store.GetService("h")
	if a := addrs(EndpointsOf(store, got, 80, nil)); !slices.Equal(a, []string{"10.1.0.1"}) {
		t.Fatalf("first definition's endpoints %v", a)
	}
	b := got.Others[0] // both public: clients of b get the oldest, a's
	for _, tc := range []struct {
		port int32
		sel  Labels
		want []string
	}{{80, nil, []string{"10.0.0.1", "10.0.0.2"}}, {80, Labels{"v": "2"}, []string{"10.0.0.2"}}, {81, nil, []string{"10.0.0.3"}}, {82, nil, nil}} {
		if a := addrs(EndpointsOf(store, b, tc.port, tc.sel)); !slices.Equal(a, tc.want) {
			t.Errorf("second definition's endpoints of %d %v: %v, want %v", tc.port, tc.sel, a, tc.want)
		}
	}
	for _, tc := range []struct {
		svc  *Service
		port string
		sel  Labels
		want []string
	}{
		{got, "grpc", nil, []string{"10.1.0.1"}}, {got, "other", nil, nil},
		{b, "grpc", nil, []string{"10.0.0.1", "10.0.0.2"}}, {b, "grpc", Labels{"v": "1"}, []string{"10.0.0.1"}},
		{b, "other", nil, []string{"10.0.0.3"}}, {b, "nosuch", nil, nil},
	} {
		if a := addrs(EndpointsByPortNameOf(store, tc.svc, tc.port, tc.sel)); !slices.Equal(a, tc.want) {
			t.Errorf("%s's endpoints of port %q %v: %v, want %v", tc.svc.Namespace, tc.port, tc.sel, a, tc.want)
		}
	}

	// A change of the second definition's endpoints alone is a change.
	changed := WithDefinitions(first, []Definition{{Service: second, Endpoints: []*Endpoint{ep("10.0.0.9", "grpc", nil)}}})
	if svc.Equal(changed) {
		t.Fatal("services whose second definitions' endpoints differ are equal")
	}
	if !svc.Equal(WithDefinitions(first, []Definition{{Service: second, Endpoints: []*Endpoint{
		ep("10.0.0.1", "grpc", Labels{"v": "1"}), ep("10.0.0.2", "grpc", Labels{"v": "2"}), ep("10.0.0.3", "other", nil)}}})) {
		t.Fatal("the same definitions in another order of endpoints differ")
	}
}

// MeshConfig's defaultServiceExportTo applies to every definition.
func TestExportDefaultsReachEveryDefinition(t *testing.T) {
	svc := WithDefinitions(&Service{Hostname: "h", Namespace: "a"}, []Definition{{Service: &Service{Hostname: "h", Namespace: "b"}}})
	got := withDefault(svc, []string{"."})
	if !slices.Equal(got.ExportTo, []string{"."}) || !slices.Equal(got.Others[0].ExportTo, []string{"."}) {
		t.Fatalf("exportTo %v and %v, want the default on both", got.ExportTo, got.Others[0].ExportTo)
	}
	if svc.Others[0].ExportTo != nil {
		t.Fatal("withDefault modified the definition")
	}
	if got.ForNamespace("b").Namespace != "b" || got.ForNamespace("c") != nil {
		t.Fatal("with the default each namespace sees its own only")
	}
	if _, ok := got.Others[0].OwnEndpoints(); !ok {
		t.Fatal("the copy lost the definition's endpoints")
	}
}
