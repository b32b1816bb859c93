package aggregate

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/meshpilot/meshpilot/internal/model"
)

// ConflictReport is told that a hostname's port conflict appeared or
// changed (ended false, c as PortConflicts gives it), or ended (ended
// true, c with its Hostname alone).
type ConflictReport func(c PortConflict, ended bool)

// ReportPortConflicts has the aggregate tell report of each port conflict
// once, when it appears, changes or ends, not on every push: a log line
// per conflict. The hostname of each event is checked (one GetService
// per source; nothing more, and no allocation, with a single source), and
// so is every hostname a change of sources touches, since a definition
// that is shadowed from the start may change nothing served and emit no
// event. Call it once, before Run and before any source is added. report
// is called on the sources' goroutines, one call at a time; it must not
// block for long nor call back into the aggregate's changes of sources.
func (a *Controller) ReportPortConflicts(report ConflictReport) {
	r := &conflictReporter{view: &a.view, report: report, known: map[model.Hostname]string{}}
	a.conflicts.Store(r)
	a.AppendEventHandler(func(ev model.Event) { r.check(ev.Hostname) })
}

// conflictReporter remembers the conflicts reported, so that each is
// reported once.
type conflictReporter struct {
	view   *atomic.Pointer[view] // the aggregate's
	report ConflictReport

	// mu guards known, and orders the checks: the last check of a
	// hostname reads the latest view, so what is known ends up true
	// whatever order the sources' events come in.
	mu sync.Mutex
	// known holds, by hostname, the conflict reported last, as its
	// signature.
	known map[model.Hostname]string
}

// check reports what changed in h's conflict since the last report.
func (r *conflictReporter) check(h model.Hostname) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.view.Load().portConflict(h)
	last, had := r.known[h]
	if !ok {
		if had {
			delete(r.known, h)
			r.report(PortConflict{Hostname: h}, true)
		}
		return
	}
	sig := fmt.Sprint(c.Definitions)
	if had && sig == last {
		return
	}
	r.known[h] = sig
	r.report(c, false)
}
