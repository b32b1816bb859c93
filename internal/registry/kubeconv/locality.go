package kubeconv

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Where a locality comes from, in Istio's order (its controller's
// getPodLocality): the Pod's own label, then its Node's labels.
const (
	// localityPodLabel lets a Pod override the locality its Node reports;
	// label values cannot hold "/", hence "region.zone.subzone".
	localityPodLabel = "topology.istio.io/locality"
	// legacyLocalityPodLabel is the older name of localityPodLabel, still
	// read when the new one is absent.
	legacyLocalityPodLabel = "istio-locality"
	// subzoneNodeLabel is Istio's: Kubernetes has no subzone label.
	subzoneNodeLabel = "topology.istio.io/subzone"
)

// podLocalityLabel returns the Pod's locality override, "" for none. Like
// Istio's GetLocalityLabel, the newer label is taken whenever it is
// present, even empty, and then the older one is not read.
func podLocalityLabel(pod *PodInfo) string {
	if pod == nil {
		return ""
	}
	if v, ok := pod.Labels[localityPodLabel]; ok {
		return v
	}
	return pod.Labels[legacyLocalityPodLabel]
}

// nodeLocality reads a Node's topology labels. Clusters older than
// Kubernetes 1.17, and some providers still, set only the deprecated
// failure-domain labels; as in Istio, each GA label falls back to its
// deprecated twin when empty.
func nodeLocality(node *corev1.Node) model.Locality {
	if node == nil {
		return model.Locality{}
	}
	return model.Locality{
		Region:  cmp.Or(node.Labels[corev1.LabelTopologyRegion], node.Labels[corev1.LabelFailureDomainBetaRegion]),
		Zone:    cmp.Or(node.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelFailureDomainBetaZone]),
		Subzone: node.Labels[subzoneNodeLabel],
	}
}

// Locality says where a Pod runs: the Pod's "topology.istio.io/locality"
// label, else its "istio-locality" label (region.zone.subzone), then the
// Node's topology labels (see nodeLocality), then sliceZone (the
// EndpointSlice's view, used when neither Pod nor Node says). Any argument
// may be nil.
func Locality(pod *PodInfo, node *corev1.Node, sliceZone *string) model.Locality {
	if v := podLocalityLabel(pod); v != "" {
		return model.ParseLocality(v)
	}
	if l := nodeLocality(node); l != (model.Locality{}) {
		return l
	}
	if sliceZone != nil {
		return model.Locality{Zone: *sliceZone}
	}
	return model.Locality{}
}
