package configstatus

import (
	"bytes"
	"log/slog"
	"testing"
)

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

// TestReporterLogsRefusalsOnce: a refusal is logged once with its object,
// field and reason, however often the same status is set again (an
// informer's relist), and its end is logged once; an unchanged status
// wakes no OnChange function.
func TestReporterLogsRefusalsOnce(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter()
	r.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	changes := 0
	r.OnChange(func() { changes++ })
	ref := Ref{Kind: "DestinationRule", Namespace: "ns", Name: "a"}
	bad := Refuse("spec.host", "wildcard hosts are not served yet")
	for _, step := range []struct {
		set         Status
		wantChanges int
	}{
		{bad, 1},
		{bad, 1},
		{Refuse("spec.host", "wildcard hosts are not served yet"), 1},
		{Refuse("spec.subsets[1].name", "subset v1 is defined twice"), 2},
		{Status{}, 3},
		{Status{}, 3},
	} {
		r.Set(ref, step.set)
		if changes != step.wantChanges {
			t.Fatalf("after Set(%+v): %d changes, want %d", step.set, changes, step.wantChanges)
		}
	}
	r.Delete(ref)
	r.Delete(ref)
	if changes != 4 {
		t.Fatalf("after two Deletes: %d changes, want 4", changes)
	}
	want := `level=WARN msg="configuration refused; its last good version stays in force" kind=DestinationRule namespace=ns name=a field=spec.host reason="wildcard hosts are not served yet"
level=WARN msg="configuration refused; its last good version stays in force" kind=DestinationRule namespace=ns name=a field=spec.subsets[1].name reason="subset v1 is defined twice"
level=INFO msg="configuration applied after a refusal" kind=DestinationRule namespace=ns name=a
`
	if buf.String() != want {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// A conversion records every problem it meets; the first refusal is the
// one reported, ignored fields all are.
func TestStatusRecordsProblems(t *testing.T) {
	var s Status
	s.IgnoreGRPC("spec.a", "one")
	s.RefuseAt("spec.b", "first")
	s.RefuseAt("spec.c", "second")
	s.IgnoreEnvoy("spec.d", "two")
	s.IgnoreGRPC("spec.e", "three")
	if s.Refused == nil || *s.Refused != (Field{Path: "spec.b", Why: "first"}) {
		t.Fatalf("Refused = %+v, want the first refusal", s.Refused)
	}
	if len(s.IgnoredGRPC) != 2 || s.IgnoredGRPC[1].Path != "spec.e" || len(s.IgnoredEnvoy) != 1 || s.IgnoredEnvoy[0].Why != "two" {
		t.Fatalf("ignored fields %+v / %+v", s.IgnoredGRPC, s.IgnoredEnvoy)
	}
}
