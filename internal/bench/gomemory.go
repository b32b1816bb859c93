package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"
)

// GoMemory is meshpilot's Go runtime's own account of its memory at the
// end of a phase, read from its /metrics (the Prometheus Go collector),
// in bytes. Set against the process's anonymous RSS it tells what the
// RSS is made of: live heap, the garbage and headroom the collector
// lets the heap grow into, free pages the runtime keeps, stacks and the
// runtime's own structures.
type GoMemory struct {
	// HeapInuse is the heap's spans holding objects: live ones, garbage
	// not collected yet, and the unused rest of each span.
	HeapInuse int64 `json:"heap_inuse_bytes"`
	// HeapLive is what the last collection marked live; -1 when meshpilot
	// does not export it (go_gc_heap_live_bytes, older builds).
	HeapLive int64 `json:"heap_live_bytes"`
	// HeapFree is free heap the runtime keeps rather than returning it to
	// the OS (heap idle less released): resident once touched.
	HeapFree int64 `json:"heap_free_bytes"`
	// HeapReleased is free heap returned to the OS: not resident.
	HeapReleased int64 `json:"heap_released_bytes"`
	// Stacks are the goroutines' stacks in use.
	Stacks int64 `json:"stack_inuse_bytes"`
	// Runtime is what the runtime holds for itself: span and per-P
	// cache structures, the collector's metadata, profiling buckets and
	// the rest (mspan, mcache, gc, buck_hash and other sys). Reserved
	// rather than resident: an upper bound of what it adds to the RSS.
	Runtime int64 `json:"runtime_bytes"`
	// Sys is everything the runtime obtained from the OS.
	Sys int64 `json:"sys_bytes"`
	// GCGoal is the heap size at which the next collection ends.
	GCGoal int64 `json:"gc_goal_bytes"`
}

// The Go collector's metrics GoMemory reads. heapLiveMetric comes from
// runtime/metrics, which meshpilot adds to the collector's defaults.
const (
	heapLiveMetric     = "go_gc_heap_live_bytes"
	heapIdleMetric     = "go_memstats_heap_idle_bytes"
	heapReleasedMetric = "go_memstats_heap_released_bytes"
	stackInuseMetric   = "go_memstats_stack_inuse_bytes"
	sysMetric          = "go_memstats_sys_bytes"
	nextGCMetric       = "go_memstats_next_gc_bytes"
)

// runtimeSysMetrics add up to GoMemory.Runtime.
var runtimeSysMetrics = []string{
	"go_memstats_mspan_sys_bytes",
	"go_memstats_mcache_sys_bytes",
	"go_memstats_gc_sys_bytes",
	"go_memstats_buck_hash_sys_bytes",
	"go_memstats_other_sys_bytes",
}

// goMemoryMetrics are every metric GoMemory reads.
var goMemoryMetrics = append([]string{heapInuseMetric, heapLiveMetric, heapIdleMetric, heapReleasedMetric,
	stackInuseMetric, sysMetric, nextGCMetric}, runtimeSysMetrics...)

// goMemoryFrom makes a GoMemory of a page's metrics. Every MemStats
// metric is required (the Go collector has exported them for years); the
// live heap is optional.
func goMemoryFrom(m map[string]float64) (*GoMemory, error) {
	for _, name := range goMemoryMetrics {
		if _, ok := m[name]; !ok && name != heapLiveMetric {
			return nil, fmt.Errorf("no %s", name)
		}
	}
	g := &GoMemory{
		HeapInuse:    int64(m[heapInuseMetric]),
		HeapLive:     -1,
		HeapFree:     int64(m[heapIdleMetric] - m[heapReleasedMetric]),
		HeapReleased: int64(m[heapReleasedMetric]),
		Stacks:       int64(m[stackInuseMetric]),
		Sys:          int64(m[sysMetric]),
		GCGoal:       int64(m[nextGCMetric]),
	}
	if v, ok := m[heapLiveMetric]; ok {
		g.HeapLive = int64(v)
	}
	for _, name := range runtimeSysMetrics {
		g.Runtime += int64(m[name])
	}
	return g, nil
}

// parseGoMemory reads a GoMemory from a Prometheus text page.
func parseGoMemory(r io.Reader) (*GoMemory, error) {
	m, err := parseMetrics(r, goMemoryMetrics...)
	if err != nil {
		return nil, err
	}
	return goMemoryFrom(m)
}

// readGoMemory scrapes meshpilot's /metrics at url. Scraping makes the Go
// collector read the runtime's statistics, a stop of the world of a few
// microseconds: cheap at the end of a phase, not for sampling.
func readGoMemory(ctx context.Context, url string) (*GoMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := scrapePresent(ctx, http.DefaultClient, url, goMemoryMetrics...)
	if err != nil {
		return nil, err
	}
	g, err := goMemoryFrom(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return g, nil
}

// heapAndStacks is the part of the anonymous RSS the runtime accounts
// for page by page: the heap's spans in use and the free ones it keeps,
// and stacks. What the RSS holds beyond it is mostly the runtime's own
// structures, the resident part of Runtime.
func (g *GoMemory) heapAndStacks() int64 { return g.HeapInuse + g.HeapFree + g.Stacks }

// writeGoMemoryTable prints the Go runtime's breakdown of each phase's
// anonymous RSS, for the phases that have one.
func writeGoMemoryTable(out io.Writer, phases []Phase) {
	var rows []Phase
	for _, p := range phases {
		if p.GoMemory != nil {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Go memory after (MiB)\tanon\theap in use\tof it live\theap free kept\tstacks\tanon beyond these\truntime reserved\tGC goal\treleased\t")
	for _, p := range rows {
		g := p.GoMemory
		live := "-"
		if g.HeapLive >= 0 {
			live = fmt.Sprintf("%.1f", mib(g.HeapLive))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", p.Name, mib(p.RSSAnon),
			mib(g.HeapInuse), live, mib(g.HeapFree), mib(g.Stacks), mib(p.RSSAnon-g.heapAndStacks()),
			mib(g.Runtime), mib(g.GCGoal), mib(g.HeapReleased))
	}
	tw.Flush()
	fmt.Fprintln(out, "(heap in use: spans holding objects, live or garbage; of it live: marked by the last collection; heap free kept: idle, not released to the OS; anon beyond these: mostly the resident part of the runtime's own structures, which it reserves in full)")
}
