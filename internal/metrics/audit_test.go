package metrics

import (
	"testing"
)

// TestAudits: each audit counts a run and sets the differences of every
// kind it reports, zeros included, so that a repaired kind goes back to
// 0; relists count per kind.
func TestAudits(t *testing.T) {
	m := New()
	a := m.WatchAudits()
	a.Audited(map[string]int{"EndpointSlice": 1, "model.Endpoint": 2, "Pod": 0})
	a.Relisted("EndpointSlice")
	a.Audited(map[string]int{"EndpointSlice": 0, "model.Endpoint": 0, "Pod": 0})

	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			name := f.GetName()
			for _, l := range s.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"meshpilot_audit_runs_total":                  2,
		"meshpilot_audit_differences/EndpointSlice":   0,
		"meshpilot_audit_differences/model.Endpoint":  0,
		"meshpilot_audit_differences/Pod":             0,
		"meshpilot_audit_relists_total/EndpointSlice": 1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present: %v), want %v", name, v, ok, want)
		}
	}
}
