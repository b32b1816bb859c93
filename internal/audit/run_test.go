package audit

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/registry/kube"
)

// repairs records what a repairer asks of the registry; the rest of
// Registry is never called.
type repairs struct {
	Registry
	relisted []string
	resynced []serviceRef
}

func (r *repairs) Relist(kind string) (int, error) {
	r.relisted = append(r.relisted, kind)
	return 1, nil
}

func (r *repairs) Resync(namespace, name string) {
	r.resynced = append(r.resynced, serviceRef{namespace, name})
}

// TestRepairAfterTwoAudits: a difference is repaired by the periodic
// audit after the one that first found it, once per kind; a kind just
// relisted is left a whole interval to recover; model differences
// rebuild their services.
func TestRepairAfterTwoAudits(t *testing.T) {
	reg := &repairs{}
	a, err := New(Options{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := &repairer{a: a, relisted: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	slice := Difference{Kind: kube.KindEndpointSlice, Object: "ns/a", Field: "metadata.resourceVersion"}
	eps := Difference{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.1", service: serviceRef{"ns", "a"}}
	eps2 := Difference{Kind: KindModelEndpoint, Object: "a.ns.svc.cluster.local:80", Field: "endpoint 192.0.2.2", service: serviceRef{"ns", "a"}}
	audit := func(i int, diffs ...Difference) {
		a.seen = track(a.seen, diffs, t0.Add(time.Duration(i)*time.Minute))
		r.repair(Report{Started: t0.Add(time.Duration(i) * time.Minute), Differences: diffs})
	}
	for i, step := range []struct {
		diffs    []Difference
		relisted []string
		resynced int
	}{
		{[]Difference{slice}, nil, 0},                                                      // first seen
		{[]Difference{slice, eps, eps2}, []string{kube.KindEndpointSlice}, 0},              // outlived two audits; eps new
		{[]Difference{slice, eps, eps2}, []string{kube.KindEndpointSlice}, 1},              // slice relisted at the previous audit: wait; eps outlived
		{[]Difference{slice}, []string{kube.KindEndpointSlice, kube.KindEndpointSlice}, 1}, // the relist did not help: again
		{nil, []string{kube.KindEndpointSlice, kube.KindEndpointSlice}, 1},
	} {
		audit(i, slices.Clone(step.diffs)...)
		if !slices.Equal(reg.relisted, step.relisted) || len(reg.resynced) != step.resynced {
			t.Fatalf("after audit %d: relisted %v, resynced %v; want %v and %d", i, reg.relisted, reg.resynced, step.relisted, step.resynced)
		}
	}
	if reg.resynced[0] != (serviceRef{"ns", "a"}) {
		t.Fatalf("resynced %v", reg.resynced)
	}
}
