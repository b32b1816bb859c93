package model

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
func withDefault(svc *Service, def []string) *Service {
	if svc == nil || len(def) == 0 || len(svc.ExportTo) > 0 {
		return svc
	}
	c := *svc
	c.ExportTo = def
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
