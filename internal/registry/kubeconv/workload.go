package kubeconv

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// ConvertWorkload describes a Pod (node may be nil) as a model.Workload.
func ConvertWorkload(pod *PodInfo, node *corev1.Node) *model.Workload {
	if pod == nil {
		return nil
	}
	return &model.Workload{
		Name:           pod.Name,
		Namespace:      pod.Namespace,
		Addresses:      slices.Clone(pod.IPs),
		Labels:         maps.Clone(pod.Labels),
		Locality:       Locality(pod, node, nil),
		NodeName:       pod.NodeName,
		ServiceAccount: pod.ServiceAccount,
	}
}
