package aggregate

// SourceSize is what one source holds.
type SourceSize struct {
	Source              string
	Services, Endpoints int
}

// SourceSizes returns the number of services and endpoints each source
// holds, by precedence, for the metrics of each cluster: a hostname that
// two sources define counts in each, as do endpoints that two list. A
// source that counts itself (Len) is asked; another is counted service
// by service.
func (a *Controller) SourceSizes() []SourceSize {
	v := a.view.Load()
	out := make([]SourceSize, len(v.sources))
	for i, s := range v.sources {
		out[i].Source = s.Name
		if l, ok := s.Controller.(interface{ Len() (int, int) }); ok {
			out[i].Services, out[i].Endpoints = l.Len()
			continue
		}
		svcs := s.Controller.Services()
		out[i].Services = len(svcs)
		for _, svc := range svcs {
			for _, p := range svc.Ports {
				out[i].Endpoints += len(s.Controller.EndpointsByPortName(svc.Hostname, p.Name, nil))
			}
		}
	}
	return out
}
