package bench

import (
	"fmt"
	"strings"
	"time"
)

// setupWrites is how many API writes setup makes: a namespace each, a
// node each, and per service the Service, two per Pod (create and
// status: the API server ignores a new Pod's status; none with NoPods)
// and the slice.
func (w *workload) setupWrites() int64 {
	perService := 2
	if !w.cfg.NoPods {
		perService += 2 * w.cfg.Endpoints
	}
	return int64(w.cfg.Namespaces + len(w.nodes) + len(w.services)*perService)
}

// reportSetup logs, every interval until the returned stop is called, how
// far setup has come, its write rate over the last interval, when it will
// be done at that rate and the cores each process used meanwhile: at
// tens of thousands of services the setup takes longer than the rest of
// the run, and the API server is what bounds it.
func (w *workload) reportSetup(every time.Duration, logf func(string, ...any)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		total := w.setupWrites()
		meter := newCPUMeter()
		last, lastAt := w.writes.Load(), time.Now()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n, now := w.writes.Load(), time.Now()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			eta := "-"
			if rate > 0 && n < total {
				eta = (time.Duration(float64(total-n)/rate) * time.Second).Round(time.Second).String()
			}
			var cores []string
			for _, u := range meter.lap() {
				cores = append(cores, fmt.Sprintf("%s %.1f", u.Name, u.Cores))
			}
			logf("setup: %d of %d writes (%.0f %%), %.0f/s lately, done in about %s at that rate; cores: %s",
				n, total, 100*float64(n)/float64(total), rate, eta, strings.Join(cores, ", "))
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
