package serviceentry

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	apinetworking "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// workload is one WorkloadEntry, or one endpoint of a ServiceEntry (the
// same message): an address and what it serves.
type workload struct {
	namespace string
	address   string
	// isIP: address is an IP; otherwise a DNS name, which only a DNS
	// ServiceEntry can use.
	isIP bool
	// ports maps a service port name to the workload's port for it.
	ports map[string]uint32
	// labels are the workload's own, which selectors match;
	// endpointLabels are its endpoints', with Istio's topology labels
	// (kubeconv.AugmentLabels), shared by its endpoints.
	labels, endpointLabels map[string]string
	locality               model.Locality
	weight                 uint32
	network                string
	serviceAccount         string
	// podName and nodeName are set for a Pod.
	podName, nodeName string
}

// convertWorkload reads a WorkloadEntry spec; path is where it sits in
// its object ("spec" for a WorkloadEntry, "spec.endpoints[2]" for an
// endpoint of a ServiceEntry). It refuses a workload without an address
// or with one that is neither an IP nor a DNS name (meshpilot serves no
// Unix sockets), and a port out of range.
func convertWorkload(we *apinetworking.WorkloadEntry, namespace, path string) (*workload, *configstatus.Field) {
	w := &workload{
		namespace:      namespace,
		address:        we.GetAddress(),
		ports:          maps.Clone(we.GetPorts()),
		labels:         maps.Clone(we.GetLabels()),
		locality:       model.ParseLocality(we.GetLocality()),
		weight:         we.GetWeight(),
		network:        we.GetNetwork(),
		serviceAccount: we.GetServiceAccount(),
	}
	w.augmentLabels()
	switch {
	case w.address == "":
		// Istio allows an empty address on a network reached through a
		// gateway; meshpilot does not route across networks.
		return nil, &configstatus.Field{Path: path + ".address", Why: "a workload needs an address"}
	case isIP(w.address):
		w.isIP = true
	case !isDNSName(w.address):
		return nil, &configstatus.Field{Path: path + ".address", Why: fmt.Sprintf("%q is neither an IP address nor a DNS name", w.address)}
	}
	for _, name := range slices.Sorted(maps.Keys(w.ports)) {
		if p := w.ports[name]; p == 0 || p > 65535 {
			return nil, &configstatus.Field{Path: path + ".ports." + name, Why: fmt.Sprintf("port %d is out of range", p)}
		}
	}
	return w, nil
}

// augmentLabels sets endpointLabels from the workload's labels and
// topology, as Istio labels the endpoints of WorkloadEntries and Pods
// (its AugmentLabels): a Pod gets its Node's label too. The cluster is the
// local one: WorkloadEntries and ServiceEntries are read from it alone.
func (w *workload) augmentLabels() {
	w.endpointLabels = kubeconv.AugmentLabels(w.labels, kubeconv.Topology{
		Locality: w.locality, Cluster: model.DefaultClusterID, Node: w.nodeName, Network: w.network,
	})
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// isDNSName: a name a resolver can look up (RFC 1123, any case, an
// optional final dot).
func isDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	return s != "" && len(validation.IsDNS1123Subdomain(strings.ToLower(s))) == 0
}

// endpoint is the workload's endpoint for one service port: the port the
// workload maps the port's name to, else the service's target port.
func (w *workload) endpoint(p model.Port) *model.Endpoint {
	port := uint32(p.TargetPort)
	if mapped, ok := w.ports[p.Name]; ok {
		port = mapped
	}
	return w.endpointOn(p, port)
}

// endpointOn is the workload's endpoint for service port p on its port
// number port; none for 0.
func (w *workload) endpointOn(p model.Port, port uint32) *model.Endpoint {
	if port == 0 {
		return nil
	}
	return &model.Endpoint{
		Address:         w.address,
		Port:            port,
		ServicePortName: p.Name,
		Labels:          w.endpointLabels,
		Locality:        w.locality,
		Health:          model.Healthy,
		Namespace:       w.namespace,
		ServiceAccount:  w.serviceAccount,
		PodName:         w.podName,
		NodeName:        w.nodeName,
		Weight:          w.weight,
		Network:         w.network,
	}
}

// kubernetesEndpoint is the workload's endpoint for a port of a
// Kubernetes Service that selects it, as istiod maps it
// (serviceInstanceFromWorkloadInstance): for a numeric target port, the
// workload's port of the service port's name, else the target port; for
// a named target port, the workload's port of that name alone (the
// service port's own name does not count), and no endpoint when the
// workload has none of that name.
func (w *workload) kubernetesEndpoint(p model.Port) *model.Endpoint {
	if p.TargetPort == 0 {
		return w.endpointOn(p, w.ports[p.TargetPortName])
	}
	return w.endpoint(p)
}
