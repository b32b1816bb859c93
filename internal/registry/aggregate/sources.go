package aggregate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

// syncPoll is how often ReplaceSource asks a replacement whether it has
// synced: model.Controller has no notification for it.
const syncPoll = 50 * time.Millisecond

// AddSource adds s after every other source, so with the lowest
// precedence: its definition of a hostname is served only where no other
// source defines it, and its endpoints join the union. That is where a
// remote cluster goes: the local cluster's definitions win, as in
// Istio. The aggregate runs s (s.Run on a context derived from ctx, which
// RemoveSource and ReplaceSource cancel) whether or not the aggregate's
// own Run has started; a failure of that Run goes to
// Options.SourceFailed and leaves s serving its last model.
//
// The aggregate does not wait for s to sync: s is served at once, as it
// fills, each of its changes with its event, and HasSynced ignores it, so
// a remote cluster that never syncs holds up neither readiness nor the
// local sources. What s serves when it is added is emitted as events
// (ServiceChanged for a hostname now served or whose served definition
// is now s's, EndpointsChanged where only the union of endpoints grew).
func (a *Controller) AddSource(ctx context.Context, s Source) error {
	if err := checkSource(s); err != nil {
		return err
	}
	a.viewMu.Lock()
	old := a.view.Load()
	if old.find(s.Name) != nil {
		a.viewMu.Unlock()
		return fmt.Errorf("aggregate: a source is named %q already", s.Name)
	}
	e := a.newAdded(ctx, s)
	a.swap(old, newView(append(slices.Clip(old.sources), e)))
	a.viewMu.Unlock()
	a.run(e)
	return nil
}

// RemoveSource removes a source added with AddSource and stops its Run
// (without waiting for it to return). What the aggregate served of it
// goes, with events: ServiceDeleted for a hostname no other source
// defines, ServiceChanged where the served definition was its,
// EndpointsChanged where only the union of endpoints shrank. The sources
// of New cannot be removed.
func (a *Controller) RemoveSource(name string) error {
	a.viewMu.Lock()
	old := a.view.Load()
	e, err := old.added(name)
	if err != nil {
		a.viewMu.Unlock()
		return err
	}
	a.swap(old, newView(slices.DeleteFunc(slices.Clone(old.sources), func(x *entry) bool { return x == e })))
	a.viewMu.Unlock()
	e.cancel()
	return nil
}

// ReplaceSource puts s in the place of the source of that name, added with
// AddSource, for a changed credential: s takes the old source's name and
// precedence and runs on the context the old one was added with. It first
// runs s and waits, until ctx ends, for s to sync, while the old source
// goes on serving; then it swaps them in one step and stops the old one.
// Readers see either source, never neither, so endpoints that both serve
// never disappear, and the events say only what differs between the two
// (none when they serve the same). When ctx ends or s fails first, s is
// stopped, the old source stays, and the error says why. ReplaceSource
// blocks while s syncs: call it from a goroutine that may wait.
func (a *Controller) ReplaceSource(ctx context.Context, name string, s Source) error {
	if err := checkSource(s); err != nil {
		return err
	}
	if s.Name != name {
		return fmt.Errorf("aggregate: replacing source %q by one named %q", name, s.Name)
	}
	a.viewMu.RLock()
	old, err := a.view.Load().added(name)
	a.viewMu.RUnlock()
	if err != nil {
		return err
	}
	e := a.newAdded(old.ctx, s)
	a.run(e)
	if err := waitSynced(ctx, e); err != nil {
		e.cancel()
		return fmt.Errorf("aggregate: source %q: the replacement did not sync: %w", name, err)
	}
	a.viewMu.Lock()
	v := a.view.Load()
	i := v.index(old)
	if i < 0 {
		// Removed or replaced meanwhile: the newer change stands.
		a.viewMu.Unlock()
		e.cancel()
		return fmt.Errorf("aggregate: source %q changed while its replacement synced", name)
	}
	sources := slices.Clone(v.sources)
	sources[i] = e
	a.swap(v, newView(sources))
	a.viewMu.Unlock()
	old.cancel()
	return nil
}

// added returns the source of that name if AddSource added it.
func (v *view) added(name string) (*entry, error) {
	e := v.find(name)
	switch {
	case e == nil:
		return nil, fmt.Errorf("aggregate: no source is named %q", name)
	case !e.added:
		return nil, fmt.Errorf("aggregate: source %q was given to New: it stays", name)
	}
	return e, nil
}

// newAdded makes the entry of a source added to run under ctx, and adds
// the aggregate's event handler to it; its events count once it is in
// the view.
func (a *Controller) newAdded(ctx context.Context, s Source) *entry {
	runCtx, cancel := context.WithCancel(ctx)
	e := &entry{Source: s, added: true, ctx: ctx, runCtx: runCtx, cancel: cancel, done: make(chan struct{})}
	s.Controller.AppendEventHandler(func(ev model.Event) { a.fanIn(e, ev) })
	return e
}

// run runs an added source until its context ends.
func (a *Controller) run(e *entry) {
	go func() {
		defer close(e.done)
		if err := e.Controller.Run(e.runCtx); err != nil && a.sourceFailed != nil {
			a.sourceFailed(e.Name, err)
		}
	}()
}

// waitSynced waits until e has synced, ctx ends or e's Run returns.
func waitSynced(ctx context.Context, e *entry) error {
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for !e.Controller.HasSynced() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return fmt.Errorf("its Run returned")
		case <-tick.C:
		}
	}
	return nil
}

// swap makes next the view and emits what changed from old. The caller
// holds viewMu for writing, so no source's event interleaves.
func (a *Controller) swap(old, next *view) {
	hosts := servedHostnames(old, next)
	before := make([]served, len(hosts))
	for i, h := range hosts {
		before[i] = old.served(h)
	}
	a.view.Store(next)
	for i, h := range hosts {
		if ev, ok := change(h, before[i], next.served(h)); ok {
			a.emit(ev)
		}
	}
	if r := a.conflicts.Load(); r != nil {
		for _, h := range hosts {
			r.check(h)
		}
	}
}
