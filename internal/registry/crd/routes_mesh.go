package crd

import (
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// defaultExportTo gives a VirtualService that says no exportTo
// MeshConfig's defaultVirtualServiceExportTo, as istiod does; without
// one in force it stays exported to all.
func (r *Routes) defaultExportTo(vs *model.VirtualService) {
	if vs == nil || len(vs.ExportTo) > 0 || r.opts.Mesh == nil {
		return
	}
	if m := r.opts.Mesh.Mesh(); m != nil {
		vs.ExportTo = slices.Clone(m.DefaultExportTo.VirtualService)
	}
}

// onMeshEvent converts again, on a change of the default exportTo, every
// VirtualService: those that say none change, and their hosts are
// pushed; the others convert as before and push nothing.
func (r *Routes) onMeshEvent(ev model.Event) {
	if ev.Kind != model.ConfigChanged || ev.Config != model.MeshExportToKey {
		return
	}
	r.mu.RLock()
	keys := make([]string, 0, len(r.converted))
	for k := range r.converted {
		keys = append(keys, k)
	}
	r.mu.RUnlock()
	slices.Sort(keys)
	for _, k := range keys {
		ns, name := splitKey(k)
		r.update(ns, name)
	}
	if r.gwStore != nil {
		r.mu.Lock()
		hosts := r.remergeGateway()
		r.mu.Unlock()
		for _, h := range hosts {
			r.handlers.configChanged(model.VirtualServiceKey(h))
		}
	}
}
