package kube

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// The Pods of a namespace as workloads, for what selects Pods by label
// outside Kubernetes Services: a ServiceEntry's workloadSelector.

// AppendWorkloadHandler adds a function told the namespace of every Pod
// that may have changed (added, relabelled, its IPs or readiness changed,
// deleted). It runs on an informer's goroutine, so it must only take note
// and return. Call it before Run.
func (c *Controller) AppendWorkloadHandler(h func(namespace string)) {
	c.workloadHandlers = append(c.workloadHandlers, h)
}

// WorkloadsIn lists the Pods of a namespace that can serve, ordered by
// name: ready, with an IP, not terminating, as Istio hands Pods to a
// ServiceEntry's workloadSelector.
func (c *Controller) WorkloadsIn(namespace string) []*model.Workload {
	scope := c.scopeFor(namespace)
	if scope == nil {
		return nil
	}
	objs, _ := scope.pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	var out []*model.Workload
	for _, o := range objs {
		p := o.(*kubeconv.PodInfo)
		if !p.Ready || len(p.IPs) == 0 || p.DeletionTimestamp != nil ||
			p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, kubeconv.ConvertWorkload(p, c.node(p.NodeName)))
	}
	slices.SortFunc(out, func(a, b *model.Workload) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
