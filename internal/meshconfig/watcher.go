// Package meshconfig follows Istio's mesh-wide settings (MeshConfig) from
// a file or from the `mesh` key of a ConfigMap, and publishes what
// meshpilot applies of them (model.MeshSettings). A change is applied
// live and reported as one event per part of the settings it changed
// (model.MeshKeys), so that only what reads those parts is regenerated. A config that does not parse
// is refused with a log line naming its source and field; the last good
// one stays in force.
package meshconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Watcher holds the mesh settings in force and follows their source. Safe
// for concurrent use.
type Watcher struct {
	log    *slog.Logger
	source string                          // "file <path>", "configmap <ns>/<name>" or "default"
	run    func(ctx context.Context) error // follows the source; nil: nothing to follow
	synced atomic.Bool
	// syncedCh is closed once synced is set, for those that wait.
	syncedCh   chan struct{}
	syncedOnce sync.Once

	mu sync.Mutex // guards the fields below
	// state is what Status shows; state.settings is what Mesh returns.
	state    state
	raw      []byte // the source's last content, to skip no-op reloads
	handlers []model.EventHandler
	// selectorHandlers are told of each change of the discovery
	// selectors in force.
	selectorHandlers []func([]labels.Selector)
}

type state struct {
	settings *model.MeshSettings
	config   *Config // nil when the defaults are in force
	refused  string  // the last refusal, if any since the config in force
}

// Status is the mesh config in force, for /debug/configz.
type Status struct {
	// Source says where the config comes from: "file <path>",
	// "configmap <ns>/<name>", or "default".
	Source string `json:"source"`
	// Mesh is the MeshConfig in force, as given; null when Istio's
	// defaults are (no source, an empty one, a ConfigMap without it).
	Mesh any `json:"mesh"`
	// Ignored lists, once and sorted, the fields given that meshpilot
	// does not apply.
	Ignored []string `json:"ignoredFields"`
	// Refused is why the latest config was refused, when it was; the
	// config in force is then the last good one.
	Refused string `json:"refused,omitempty"`
	// ClusterLocalHosts is which hosts are cluster-local
	// (serviceSettings with Istio's defaults), most specific first.
	ClusterLocalHosts model.ClusterLocalHosts `json:"clusterLocalHosts"`
}

// Default returns a Watcher that follows nothing: Istio's default mesh.
func Default() *Watcher {
	w := newWatcher(nil, "default")
	w.markSynced()
	return w
}

func newWatcher(log *slog.Logger, source string) *Watcher {
	if log == nil {
		log = slog.Default()
	}
	return &Watcher{log: log, source: source, state: state{settings: model.DefaultMeshSettings()}, syncedCh: make(chan struct{})}
}

// Mesh returns the settings in force; never nil. It is a
// model.MeshWatcher.
func (w *Watcher) Mesh() *model.MeshSettings {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state.settings
}

// Status returns the config in force and what was ignored or refused;
// domainSuffix ends the hostnames of services, for the defaults of the
// cluster-local table ("cluster.local" when empty).
func (w *Watcher) Status(domainSuffix string) Status {
	w.mu.Lock()
	st := w.state
	w.mu.Unlock()
	out := Status{
		Source: w.source, Ignored: []string{}, Refused: st.refused,
		ClusterLocalHosts: st.settings.ClusterLocalHosts(domainSuffix),
	}
	if st.config != nil {
		out.Mesh = protoJSON(st.config.Mesh)
		out.Ignored = st.config.Ignored
	}
	return out
}

// AppendEventHandler adds a handler told of each change of the settings
// in force: one model.ConfigChanged event per key of the parts that
// changed (model.MeshKeys); call it before Run.
func (w *Watcher) AppendEventHandler(h model.EventHandler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers = append(w.handlers, h)
}

// DiscoverySelectors returns MeshConfig's discoverySelectors in force,
// converted; nil when none are given. The slice is shared: do not modify
// it.
func (w *Watcher) DiscoverySelectors() []labels.Selector {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state.selectors()
}

// AppendSelectorHandler adds a handler told of each change of the
// discovery selectors in force, with the new ones (nil: none); call it
// before Run. A selector change is no ConfigChanged event: no generated
// resource reads the selectors, only registries do, and what they add or
// remove reaches clients as service events. Handlers run on the source's
// goroutine, one change at a time, in order.
func (w *Watcher) AppendSelectorHandler(h func([]labels.Selector)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.selectorHandlers = append(w.selectorHandlers, h)
}

func (s state) selectors() []labels.Selector {
	if s.config == nil {
		return nil
	}
	return s.config.DiscoverySelectors
}

// HasSynced reports whether the source has been read once.
func (w *Watcher) HasSynced() bool { return w.synced.Load() }

// Synced is HasSynced for those that wait (cache.WaitFor): waiting on it
// wakes as the source is read, where polling HasSynced would wake up to
// a poll period later.
func (w *Watcher) Synced() cache.DoneChecker { return syncedChecker{w} }

type syncedChecker struct{ w *Watcher }

func (c syncedChecker) Name() string          { return "mesh config " + c.w.source }
func (c syncedChecker) Done() <-chan struct{} { return c.w.syncedCh }

func (w *Watcher) markSynced() {
	w.synced.Store(true)
	w.syncedOnce.Do(func() { close(w.syncedCh) })
}

// Run follows the source until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.run == nil {
		<-ctx.Done()
		return nil
	}
	return w.run(ctx)
}

// apply parses data from the source and, when it is good, puts it in force;
// a bad one is logged and the last good config stays. Empty data means
// the defaults. Called from one goroutine at a time (the source's).
func (w *Watcher) apply(data []byte) error {
	w.mu.Lock()
	if w.raw != nil && bytes.Equal(w.raw, data) {
		w.state.refused = "" // back to the config in force
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()

	next := state{settings: model.DefaultMeshSettings()}
	if len(bytes.TrimSpace(data)) > 0 {
		c, err := Parse(data)
		if err != nil {
			w.mu.Lock()
			w.state.refused = err.Error()
			w.mu.Unlock()
			w.log.Error("mesh config refused; the last good one stays in force", "source", w.source, "error", err)
			return err
		}
		next.settings, next.config = c.Settings, c
		if len(c.Ignored) > 0 {
			w.log.Warn("mesh config fields meshpilot does not apply", "source", w.source, "fields", c.Ignored)
		}
	}
	w.mu.Lock()
	selectorsChanged := !sameSelectors(w.state.selectors(), next.selectors())
	changed := model.MeshKeys(w.state.settings, next.settings)
	if len(changed) == 0 {
		// Handlers and readers keep the settings they hold.
		next.settings = w.state.settings
	}
	w.state, w.raw = next, bytes.Clone(data)
	if w.raw == nil {
		w.raw = []byte{}
	}
	handlers, selectorHandlers := w.handlers, w.selectorHandlers
	w.mu.Unlock()
	w.log.Info("mesh config in force", "source", w.source, "changed", changed, "discoverySelectorsChanged", selectorsChanged)
	for _, k := range changed {
		for _, h := range handlers {
			h(model.Event{Kind: model.ConfigChanged, Config: k})
		}
	}
	if selectorsChanged {
		for _, h := range selectorHandlers {
			h(next.selectors())
		}
	}
	return nil
}

func protoJSON(m proto.Message) json.RawMessage {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}
