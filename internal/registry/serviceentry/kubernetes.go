package serviceentry

import (
	"maps"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// WorkloadEntries are endpoints of the Kubernetes Services of their
// namespace whose selector matches their labels, as in Istio (its
// Kubernetes registry adds them to the Service's endpoints). The
// Kubernetes registry defines those services; this registry holds the
// WorkloadEntries' endpoints for them in selected, which the aggregate
// unions with the Kubernetes endpoints by port name.

// onServiceEvent follows the Kubernetes Services: a change of one
// (its selector or ports) changes the WorkloadEntries it selects.
// Endpoint changes do not matter here.
func (r *Registry) onServiceEvent(ev model.Event) {
	if ev.Kind == model.EndpointsChanged || ev.Kind == model.ConfigChanged {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.foreign[ev.Hostname] && !r.hasWorkloadsIn(ev.Namespace) {
		return
	}
	r.setSelected(ev.Hostname, r.workloadsByNamespace()[ev.Namespace])
}

func (r *Registry) hasWorkloadsIn(ns string) bool {
	for _, w := range r.workloads {
		if w.namespace == ns {
			return true
		}
	}
	return false
}

// rebuildSelected sets the endpoints the WorkloadEntries give every
// Kubernetes Service, after a WorkloadEntry changed.
func (r *Registry) rebuildSelected(byNS map[string][]*workload) {
	// Without WorkloadEntries nor endpoints given before, there is
	// nothing to look for among the Services.
	if r.opts.Services == nil || (len(byNS) == 0 && len(r.foreign) == 0) {
		return
	}
	hosts := maps.Clone(r.foreign)
	for _, svc := range r.opts.Services.Services() {
		if len(byNS[svc.Namespace]) > 0 && len(svc.Selector) > 0 {
			hosts[svc.Hostname] = true
		}
	}
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		svc := r.opts.Services.GetService(h)
		if svc == nil {
			r.setSelected(h, nil)
			continue
		}
		r.setSelected(h, byNS[svc.Namespace])
	}
}

// setSelected sets the endpoints that workloads (of the service's
// namespace) give the Kubernetes Service of hostname h.
func (r *Registry) setSelected(h model.Hostname, workloads []*workload) {
	var svc *model.Service
	if r.opts.Services != nil {
		svc = r.opts.Services.GetService(h)
	}
	var eps []*model.Endpoint
	if svc != nil && len(svc.Selector) > 0 {
		for _, w := range workloads {
			// A Kubernetes Service's endpoints are addresses.
			if !w.isIP || !svc.Selector.Matches(w.labels) {
				continue
			}
			for _, p := range svc.Ports {
				if ep := w.kubernetesEndpoint(p); ep != nil {
					eps = append(eps, ep)
				}
			}
		}
	}
	if len(eps) == 0 {
		if r.foreign[h] {
			r.selected.Delete(h)
			delete(r.foreign, h)
		}
		return
	}
	r.selected.Update(&model.Service{Hostname: h, Namespace: svc.Namespace}, eps)
	r.foreign[h] = true
}
