package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/liveheap"
)

var setupRuns atomic.Int64

// BenchmarkSetup writes b.N services of 10 ready endpoints each, as a run
// does before meshpilot starts, over namespaces of 200 services and a node
// per 333 Pods (the S=10 000 shape), into the package's API
// server. It reports API writes per second, the CPU seconds per 1000
// writes of the API server, etcd and the benchmark itself (the busiest
// bounds the rate), how much each one's RSS grew per service, and the
// bytes the workload holds per service once written. Give it a count of
// services:
//
//	go test ./internal/bench -run '^$' -bench Setup -benchtime 1000x
func BenchmarkSetup(b *testing.B) {
	cfg := Defaults()
	cfg.Services, cfg.Endpoints = b.N, 10
	cfg.Namespaces = (b.N + 199) / 200
	cfg.Nodes = max(3, b.N*cfg.Endpoints/333)
	cfg.Prefix = fmt.Sprintf("setup%d", setupRuns.Add(1))
	kc, err := kubeWriter(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()

	before := int64(liveheap.AfterGC())
	meter := newCPUMeter()
	start := meter.lap()
	b.ResetTimer()
	w := newWorkload(kc, &cfg)
	if err := w.setup(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	procs := meter.lap()
	held := int64(liveheap.AfterGC()) - before
	runtime.KeepAlive(w)

	if n := w.writes.Load(); n != w.setupWrites() {
		b.Errorf("%d writes, expected %d", n, w.setupWrites())
	}
	writes := float64(w.writes.Load())
	b.ReportMetric(writes/b.Elapsed().Seconds(), "writes/s")
	for _, p := range procs {
		if p.Name == "meshpilot" {
			continue // none here; other tests' processes are gone
		}
		b.ReportMetric(p.CPUSeconds/writes*1000, p.Name+"-cpu-s/1000writes")
		for _, s := range start {
			if s.Name == p.Name {
				b.ReportMetric(float64(p.RSS-s.RSS)/float64(b.N), p.Name+"-rss-growth-B/service")
			}
		}
	}
	b.ReportMetric(float64(held)/float64(b.N), "held-B/service")
}
