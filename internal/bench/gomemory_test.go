package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// goMemoryPage is a Go collector's page with every metric GoMemory reads,
// in MiB, less those named in skip.
func goMemoryPage(skip ...string) string {
	mibs := map[string]float64{
		heapInuseMetric: 22, heapLiveMetric: 14, heapIdleMetric: 7, heapReleasedMetric: 5,
		stackInuseMetric: 4.5, sysMetric: 40, nextGCMetric: 29,
		"go_memstats_mspan_sys_bytes": 0.5, "go_memstats_mcache_sys_bytes": 0.25, "go_memstats_gc_sys_bytes": 3,
		"go_memstats_buck_hash_sys_bytes": 1.5, "go_memstats_other_sys_bytes": 0.75,
	}
	var b strings.Builder
	for _, name := range goMemoryMetrics {
		if !strings.Contains(strings.Join(skip, " "), name) {
			fmt.Fprintf(&b, "# TYPE %s gauge\n%s %g\n", name, name, mibs[name]*(1<<20))
		}
	}
	return b.String()
}

func TestParseGoMemory(t *testing.T) {
	full := GoMemory{HeapInuse: 22 << 20, HeapLive: 14 << 20, HeapFree: 2 << 20, HeapReleased: 5 << 20,
		Stacks: 9 << 19, Runtime: 6 << 20, Sys: 40 << 20, GCGoal: 29 << 20}
	noLive := full
	noLive.HeapLive = -1
	for _, tc := range []struct {
		name    string
		page    string
		want    *GoMemory
		wantErr string
	}{
		{name: "every metric", page: goMemoryPage(), want: &full},
		{name: "an older meshpilot without the live heap", page: goMemoryPage(heapLiveMetric), want: &noLive},
		{name: "other metrics and labelled series around them",
			page: "go_goroutines 12\ngo_memstats_stack_inuse_bytes_total 99\n" + goMemoryPage() + "go_gc_heap_live_bytes_other{a=\"b\"} 7\n",
			want: &full},
		{name: "no MemStats", page: goMemoryPage(stackInuseMetric), wantErr: stackInuseMetric},
		{name: "an unreadable value", page: heapInuseMetric + " many\n", wantErr: heapInuseMetric},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseGoMemory(strings.NewReader(tc.page))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != *tc.want {
				t.Errorf("got %+v\nwant %+v", *got, *tc.want)
			}
		})
	}
}

func TestReadGoMemory(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A gzipped page would make meshpilot hold a compressor for it.
		if enc := r.Header.Get("Accept-Encoding"); enc != "identity" {
			t.Errorf("Accept-Encoding %q, want identity", enc)
		}
		fmt.Fprint(w, goMemoryPage())
	}))
	defer srv.Close()
	g, err := readGoMemory(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if g.HeapLive != 14<<20 || g.heapAndStacks() != (22+2+4.5)*(1<<20) {
		t.Errorf("got %+v, heap and stacks %d", *g, g.heapAndStacks())
	}
	srv.Close()
	if _, err := readGoMemory(t.Context(), srv.URL); err == nil {
		t.Error("a closed server gave no error")
	}
}

// TestGoMemoryTable: a row per phase with a breakdown, its anonymous RSS
// beside the runtime's parts and what the RSS holds beyond them; phases
// without one left out, and no table at all without any.
func TestGoMemoryTable(t *testing.T) {
	g, err := parseGoMemory(strings.NewReader(goMemoryPage()))
	if err != nil {
		t.Fatal(err)
	}
	old := *g
	old.HeapLive = -1
	r := &Result{Phases: []Phase{
		{Name: "sync", Usage: Usage{RSSAnon: 30 << 20}, GoMemory: &old},
		{Name: "converged", Usage: Usage{RSSAnon: 33 << 20}},
		{Name: "churn", Usage: Usage{RSSAnon: 36 << 20}, GoMemory: g},
	}}
	var out bytes.Buffer
	writeGoMemoryTable(&out, r.Phases)
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f[1:]
		}
	}
	for name, want := range map[string]string{
		// anon, heap in use, live, free kept, stacks, anon beyond
		// these, runtime reserved, goal, released
		"sync":  "30.0 22.0 - 2.0 4.5 1.5 6.0 29.0 5.0",
		"churn": "36.0 22.0 14.0 2.0 4.5 7.5 6.0 29.0 5.0",
	} {
		if got := strings.Join(rows[name], " "); got != want {
			t.Errorf("row %s: %q, want %q\n%s", name, got, want, out.String())
		}
	}
	if _, ok := rows["converged"]; ok {
		t.Errorf("a row for a phase without a breakdown:\n%s", out.String())
	}
	out.Reset()
	writeGoMemoryTable(&out, r.Phases[1:2])
	if out.Len() != 0 {
		t.Errorf("a table without any breakdown:\n%s", out.String())
	}
	out.Reset()
	r.WriteSummary(&out)
	if !strings.Contains(out.String(), "Go memory after (MiB)") {
		t.Errorf("the summary lacks the Go memory table:\n%s", out.String())
	}
}
