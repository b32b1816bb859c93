package metrics

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/meshpilot/meshpilot/internal/configstatus"
)

// TestConfigObjects: the gauge counts the objects of a Reporter by kind
// and state from the first scrape (objects recorded before it was added
// included), follows every change, and keeps a 0 series for a state that
// empties.
func TestConfigObjects(t *testing.T) {
	status := configstatus.NewReporter()
	dr := func(name string) configstatus.Ref {
		return configstatus.Ref{Kind: "DestinationRule", Namespace: "ns", Name: name}
	}
	vs := configstatus.Ref{Kind: "VirtualService", Namespace: "ns", Name: "v"}
	refused := configstatus.Refuse("spec.host", "wildcard hosts are not served yet")
	ignored := configstatus.Status{IgnoredGRPC: []configstatus.Field{{Path: "spec.http[0].mirror", Why: "gRPC clients cannot mirror"}}}
	status.Set(dr("a"), refused)

	m := New()
	m.WatchConfigObjects(status)
	for _, step := range []struct {
		desc   string
		change func()
		// want: kind state value, one per series
		want []string
	}{
		{"recorded before the gauge", func() {},
			[]string{"DestinationRule applied 0", "DestinationRule partial 0", "DestinationRule refused 1"}},
		{"more objects, another kind", func() {
			status.Set(dr("b"), configstatus.Status{})
			status.Set(dr("c"), configstatus.Status{})
			status.Set(vs, ignored)
		}, []string{"DestinationRule applied 2", "DestinationRule partial 0", "DestinationRule refused 1",
			"VirtualService applied 0", "VirtualService partial 1", "VirtualService refused 0"}},
		{"a refused object fixed, another deleted", func() {
			status.Set(dr("a"), configstatus.Status{})
			status.Delete(dr("c"))
			status.Delete(vs)
		}, []string{"DestinationRule applied 2", "DestinationRule partial 0", "DestinationRule refused 0",
			"VirtualService applied 0", "VirtualService partial 0", "VirtualService refused 0"}},
	} {
		step.change()
		if got := configObjectSeries(t, m); !slices.Equal(got, step.want) {
			t.Fatalf("%s: series %q, want %q", step.desc, got, step.want)
		}
	}
}

// TestConfigObjectsConcurrentChanges: changes made from several
// goroutines at once leave the gauge at the final count.
func TestConfigObjectsConcurrentChanges(t *testing.T) {
	status := configstatus.NewReporter()
	m := New()
	m.WatchConfigObjects(status)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ref := configstatus.Ref{Kind: "DestinationRule", Namespace: fmt.Sprint("ns", g), Name: fmt.Sprint(i)}
				status.Set(ref, configstatus.Refuse("spec.host", "wildcard hosts are not served yet"))
				if i%2 == 0 {
					status.Set(ref, configstatus.Status{})
				}
			}
		}()
	}
	wg.Wait()
	want := []string{"DestinationRule applied 100", "DestinationRule partial 0", "DestinationRule refused 100"}
	if got := configObjectSeries(t, m); !slices.Equal(got, want) {
		t.Fatalf("series %q, want %q", got, want)
	}
}

// configObjectSeries gathers config_objects as "kind state value", one
// per series, sorted.
func configObjectSeries(t *testing.T, m *Metrics) []string {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != "meshpilot_config_objects" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, fmt.Sprintf("%s %s %g", labels["kind"], labels["state"], s.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}
