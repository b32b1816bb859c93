package model

import "slices"

// WithExportDefaults returns d as clients see it under MeshConfig's
// defaultServiceExportTo (MeshSettings.DefaultExportTo.Service): a
// service that says no exportTo takes the default, as istiod gives it.
// With no default in force (Istio's: every namespace) it returns d's
// services themselves; with one, a copy of each service that says none.
//
// A change of the default changes what nearly every service is for some
// client: it is reported as MeshExportToKey, which makes a full push
// (push.Request), rather than a key every generated resource would carry.
func WithExportDefaults(d ServiceDiscovery, mesh MeshWatcher) ServiceDiscovery {
	if mesh == nil {
		return d
	}
	return exportDefaults{d, mesh}
}

type exportDefaults struct {
	ServiceDiscovery
	mesh MeshWatcher
}

func (e exportDefaults) defaults() []string {
	if m := e.mesh.Mesh(); m != nil {
		return m.DefaultExportTo.Service
	}
	return nil
}

// withDefault is svc with the default exportTo when it says none.
// The host's other definitions (Service.Others) take it too.
func withDefault(svc *Service, def []string) *Service {
	if svc == nil || len(def) == 0 {
		return svc
	}
	if len(svc.ExportTo) > 0 && !slices.ContainsFunc(svc.Others, func(o *Service) bool { return len(o.ExportTo) == 0 }) {
		return svc
	}
	c := *svc
	if len(c.ExportTo) == 0 {
		c.ExportTo = def
	}
	if len(c.Others) > 0 {
		c.Others = make([]*Service, len(svc.Others))
		for i, o := range svc.Others {
			c.Others[i] = withDefault(o, def)
		}
	}
	return &c
}

func (e exportDefaults) GetService(h Hostname) *Service {
	return withDefault(e.ServiceDiscovery.GetService(h), e.defaults())
}

func (e exportDefaults) Services() []*Service {
	all := e.ServiceDiscovery.Services()
	def := e.defaults()
	if len(def) == 0 {
		return all
	}
	out := make([]*Service, len(all))
	for i, svc := range all {
		out[i] = withDefault(svc, def)
	}
	return out
}
