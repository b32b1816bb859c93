package model

import "testing"

type fixedMesh struct{ m *MeshSettings }

func (f fixedMesh) Mesh() *MeshSettings { return f.m }

// TestWithExportDefaults: a service that says no exportTo takes
// defaultServiceExportTo; one that says some keeps its own; without a
// default the registry's services are returned themselves.
func TestWithExportDefaults(t *testing.T) {
	st := NewStore()
	quiet := &Service{Hostname: "a.ns.svc.cluster.local", Namespace: "ns"}
	said := &Service{Hostname: "b.ns.svc.cluster.local", Namespace: "ns", ExportTo: []string{"*"}}
	st.Update(quiet, nil)
	st.Update(said, nil)
	for _, tc := range []struct {
		defaults           []string
		otherSeesA, nsSees bool
		sameService        bool
	}{
		{nil, true, true, true},
		{[]string{"."}, false, true, false},
		{[]string{"other"}, true, false, false},
		{[]string{"~"}, false, false, false},
	} {
		m := DefaultMeshSettings()
		m.DefaultExportTo.Service = tc.defaults
		d := WithExportDefaults(st, fixedMesh{m})
		a := d.GetService(quiet.Hostname)
		if a.VisibleTo("other") != tc.otherSeesA || a.VisibleTo("ns") != tc.nsSees || (a == st.GetService(quiet.Hostname)) != tc.sameService {
			t.Errorf("default %v: a seen from other %v, from ns %v, the registry's own %v; want %v, %v, %v",
				tc.defaults, a.VisibleTo("other"), a.VisibleTo("ns"), a == st.GetService(quiet.Hostname), tc.otherSeesA, tc.nsSees, tc.sameService)
		}
		if b := d.GetService(said.Hostname); !b.VisibleTo("other") {
			t.Errorf("default %v: b, exported to all, hidden", tc.defaults)
		}
		all := d.Services()
		if len(all) != 2 || all[0].VisibleTo("other") != tc.otherSeesA {
			t.Errorf("default %v: Services() %v", tc.defaults, all)
		}
	}
}
