package crd

import (
	"cmp"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// MeshSource publishes the mesh settings and tells of their changes
// (meshconfig.Watcher).
type MeshSource interface {
	model.MeshWatcher
	AppendEventHandler(model.EventHandler)
}

// rootOf is the root namespace that mesh puts in force: MeshConfig's
// rootNamespace, else PolicyOptions.RootNamespace, else Istio's default
// (istio-system), so that a team's mesh-wide rules there apply under
// meshpilot as under istiod, wherever meshpilot runs.
func (p *Policies) rootOf(mesh *model.MeshSettings) string {
	if mesh != nil && mesh.RootNamespace != "" {
		return mesh.RootNamespace
	}
	return cmp.Or(p.opts.RootNamespace, model.DefaultRootNamespace)
}

func (p *Policies) onMeshEvent(ev model.Event) {
	if ev.Kind != model.ConfigChanged {
		return
	}
	switch ev.Config {
	case model.MeshRootNamespaceKey:
		p.notify(p.setRoot(p.rootOf(p.opts.Mesh.Mesh())))
	case model.MeshExportToKey:
		mesh := p.opts.Mesh.Mesh()
		hosts := p.setDefaultPrivate(mesh != nil && mesh.DefaultExportTo.DestinationRulesPrivate())
		p.reportMerged(hosts)
		p.notify(hosts)
	}
}

// setDefaultPrivate puts defaultDestinationRuleExportTo in force and
// returns the hosts whose rules it rebuilt: every host with a rule that
// says no exportTo, since which clients see such a rule changes.
func (p *Policies) setDefaultPrivate(private bool) []model.Hostname {
	p.mu.Lock()
	defer p.mu.Unlock()
	if private == p.defaultPrivate {
		return nil
	}
	p.defaultPrivate = private
	var hosts []model.Hostname
	for h, byKey := range p.naming {
		for _, r := range byKey {
			if len(r.ExportTo) == 0 {
				hosts = append(hosts, h)
				break
			}
		}
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		p.reindex(h)
	}
	return hosts
}

// setRoot puts a root namespace in force and returns the hosts whose
// choice of rule may change: those with a rule in the old or the new
// root namespace. For any other host the root namespace has no rule
// before or after, so no client's choice (model.HostRules.Choose) moves.
func (p *Policies) setRoot(root string) []model.Hostname {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.root
	if root == old {
		return nil
	}
	p.root = root
	var hosts []model.Hostname
	for h, byNS := range p.index.ByHost {
		if byNS[old] != nil || byNS[root] != nil {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return hosts
}
