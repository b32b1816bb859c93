package crd

import (
	"sync"

	"github.com/meshpilot/meshpilot/internal/model"
)

// modelHandlers are the handlers of a view's model events. Handlers may
// be added while events flow (the server is built after the rules are
// being watched); one added late misses the events before it, which is
// harmless to a reader that has served nothing yet.
type modelHandlers struct {
	mu   sync.Mutex // guards list
	list []model.EventHandler
}

func (h *modelHandlers) add(f model.EventHandler) {
	h.mu.Lock()
	h.list = append(h.list, f)
	h.mu.Unlock()
}

// configChanged tells every handler that each key changed.
func (h *modelHandlers) configChanged(keys ...model.ConfigKey) {
	h.mu.Lock()
	list := h.list
	h.mu.Unlock()
	for _, k := range keys {
		for _, f := range list {
			f(model.Event{Kind: model.ConfigChanged, Config: k})
		}
	}
}
