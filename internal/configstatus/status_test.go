package configstatus

import "testing"

func TestReporter(t *testing.T) {
	r := NewReporter()
	changes := 0
	r.OnChange(func() { changes++ })
	dr := Ref{Kind: "DestinationRule", Namespace: "ns", Name: "a", Where: "rules.yaml:3 (document 1)"}
	r.Set(dr, Refuse("spec.subsets[0].labels", "a subset selects no endpoints without labels"))
	r.Set(Ref{Kind: "DestinationRule", Namespace: "ns", Name: "b"}, Status{})
	// The same object from another place replaces its status.
	r.Set(Ref{Kind: "DestinationRule", Namespace: "ns", Name: "a", Where: "rules.yaml:9 (document 2)"},
		Status{IgnoredGRPC: []Field{{Path: "spec.trafficPolicy.loadBalancer.consistentHash.maglev", Why: "grpc-go has no Maglev"}}})
	got := r.List()
	if len(got) != 2 || got[0].Name != "a" || got[0].State() != "partial" || got[0].Where != "rules.yaml:9 (document 2)" || got[1].State() != "applied" {
		t.Fatalf("List = %+v", got)
	}
	r.Delete(Ref{Kind: "DestinationRule", Namespace: "ns", Name: "a"})
	if _, ok := r.Get(dr); ok || len(r.List()) != 1 {
		t.Fatalf("after Delete: %+v", r.List())
	}
	if changes != 4 {
		t.Fatalf("OnChange called %d times, want 4", changes)
	}
	var nilReporter *Reporter
	nilReporter.Set(dr, Status{}) // records nothing, does not panic
	if nilReporter.List() != nil {
		t.Fatal("nil Reporter lists entries")
	}
}
