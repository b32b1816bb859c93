package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Run audits every Options.Interval (jittered by up to 10 %, so that
// replicas do not list together) once the registry has synced, until ctx
// ends, and repairs what outlived two audits (see repairer). It returns
// at once when the interval is zero or less.
func (a *Auditor) Run(ctx context.Context) error {
	if a.opts.Interval <= 0 {
		return nil
	}
	r := &repairer{a: a, relisted: map[string]time.Time{}}
	timer := time.NewTimer(wait.Jitter(a.opts.Interval, 0.1))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		rep, err := a.Audit(ctx)
		switch {
		case err == ErrNotSynced:
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("consistency audit failed", "error", err)
		default:
			a.logAudit(rep)
			r.repair(rep)
		}
		timer.Reset(wait.Jitter(a.opts.Interval, 0.1))
	}
}

// logAudit says what a periodic audit found: its differences at info
// level (each kind relisted is logged again, as a warning), nothing at
// debug level.
func (a *Auditor) logAudit(rep Report) {
	if len(rep.Differences) == 0 {
		a.log.Debug("consistency audit: no difference", "took", rep.Took)
		return
	}
	d := rep.Differences[0]
	a.log.Info("consistency audit: differences from the API server", "differences", len(rep.Differences),
		"kinds", strings.Join(kindsOf(rep.Differences), ","), "first", d.Kind+" "+d.Object, "field", d.Field, "took", rep.Took)
}

// repairer decides, after each periodic audit, what to relist.
//
// A difference found by one audit may be an informer a few milliseconds
// behind the LIST, or a service still in the work queue. One that was
// already there at the previous periodic audit, a whole interval
// earlier, is not: an event was lost. Then its kind is relisted, and the
// services whose model differs are rebuilt (a difference in the model
// alone, with caches exact, means a rebuild was missed). A kind relisted
// is not relisted again until a whole interval has passed since, so that
// a relist in progress (client-go's reflector waits about a second
// before listing) is not started again.
type repairer struct {
	a *Auditor
	// prev is when the previous periodic audit started; zero before the
	// second.
	prev time.Time
	// relisted is when each kind was last relisted (or its services
	// rebuilt, for the model's kinds).
	relisted map[string]time.Time
}

func (r *repairer) repair(rep Report) {
	prev := r.prev
	r.prev = rep.Started
	if prev.IsZero() {
		return
	}
	outlived := map[string][]Difference{}
	for _, d := range rep.Differences {
		if d.Audits >= 2 && !d.Since.After(prev) && r.relisted[d.Kind].Before(prev) {
			outlived[d.Kind] = append(outlived[d.Kind], d)
		}
	}
	for _, kind := range kindsOf(rep.Differences) {
		diffs := outlived[kind]
		if len(diffs) == 0 {
			continue
		}
		r.relisted[kind] = rep.Started
		if kind == KindModelService || kind == KindModelEndpoint {
			r.rebuild(kind, diffs)
			continue
		}
		src := r.a.sourceOf(kind)
		if src == nil {
			continue // no longer watched
		}
		watches, err := src.Relist(kind)
		if err != nil {
			r.a.log.Error("relisting failed", "kind", kind, "error", err)
			continue
		}
		if r.a.opts.Observer != nil {
			r.a.opts.Observer.Relisted(kind)
		}
		r.a.log.Warn(fmt.Sprintf("relisted %ss: %s outlived two audits", kind, plural(len(diffs), "difference")),
			"kind", kind, "differences", len(diffs), "first", diffs[0].Object, "field", diffs[0].Field,
			"since", diffs[0].Since, "watches", watches)
	}
}

// rebuild asks the registry to rebuild the services of model
// differences.
func (r *repairer) rebuild(kind string, diffs []Difference) {
	done := map[serviceRef]bool{}
	for _, d := range diffs {
		if d.service.name == "" || done[d.service] {
			continue
		}
		done[d.service] = true
		r.a.opts.Registry.Resync(d.service.namespace, d.service.name)
	}
	r.a.log.Warn(fmt.Sprintf("rebuilt %s: %s of %s outlived two audits", plural(len(done), "service"), plural(len(diffs), "difference"), kind),
		"kind", kind, "first", diffs[0].Object, "field", diffs[0].Field, "since", diffs[0].Since)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
