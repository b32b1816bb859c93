package serviceentry

import (
	"maps"
	"slices"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Pods is what the registry reads of a cluster's Pods: a ServiceEntry's
// workloadSelector selects the Pods of its namespace as well as its
// WorkloadEntries, as in Istio. The Kubernetes registry implements it.
type Pods interface {
	// WorkloadsIn lists the Pods of a namespace that can serve (ready,
	// with an IP).
	WorkloadsIn(namespace string) []*model.Workload
	// AppendWorkloadHandler adds a function told the namespace of a Pod
	// that may have changed; it is called once, in New.
	AppendWorkloadHandler(func(namespace string))
}

// notePods records that Pods of a namespace changed and wakes Run; it
// never waits.
func (r *Registry) notePods(namespace string) {
	r.podMu.Lock()
	r.podNamespaces[namespace] = true
	r.podMu.Unlock()
	select {
	case r.podsChanged <- struct{}{}:
	default:
	}
}

// onPods rebuilds the model when an entry of a namespace whose Pods
// changed selects workloads; Pod churn elsewhere costs a map lookup.
func (r *Registry) onPods() {
	r.podMu.Lock()
	changed := r.podNamespaces
	r.podNamespaces = map[string]bool{}
	r.podMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.ContainsFunc(slices.Collect(maps.Values(r.entries)), func(e *entry) bool { return e.selects && changed[e.namespace] }) {
		r.rebuild(false)
	}
}

// podWorkloads are Pods as workloads a workloadSelector may select: at
// their first IP, on the service's target ports (a Pod has no ports map).
func podWorkloads(pods []*model.Workload) []*workload {
	out := make([]*workload, 0, len(pods))
	for _, p := range pods {
		if len(p.Addresses) == 0 {
			continue
		}
		w := &workload{
			namespace:      p.Namespace,
			address:        p.Addresses[0],
			isIP:           true,
			labels:         p.Labels,
			locality:       p.Locality,
			serviceAccount: p.ServiceAccount,
			podName:        p.Name,
			nodeName:       p.NodeName,
		}
		w.augmentLabels()
		out = append(out, w)
	}
	return out
}
