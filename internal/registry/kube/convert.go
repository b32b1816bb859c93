package kube

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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

// ConvertService converts a Service; it never returns nil for a non-nil
// svc. The result shares nothing with svc, so later changes to the
// informer's object cannot reach the model.
func ConvertService(svc *corev1.Service, domainSuffix string) *model.Service {
	if svc == nil {
		return nil
	}
	out := &model.Service{
		Hostname:   model.ServiceHostname(svc.Name, svc.Namespace, domainSuffix),
		Name:       svc.Name,
		Namespace:  svc.Namespace,
		Resolution: model.ClientSideLB,
		Labels:     maps.Clone(svc.Labels),
	}
	if len(svc.Spec.Ports) > 0 {
		out.Ports = make([]model.Port, 0, len(svc.Spec.Ports))
		for _, p := range svc.Spec.Ports {
			out.Ports = append(out.Ports, convertServicePort(p))
		}
	}

	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		// An alias has no virtual IP of its own, whatever clusterIP a
		// hand-written manifest carries.
		out.Resolution = model.DNSAlias
		out.ExternalName = svc.Spec.ExternalName
		return out
	case svc.Spec.ClusterIP == corev1.ClusterIPNone ||
		(len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone):
		out.Resolution = model.Passthrough
		return out
	}

	// clusterIPs is authoritative on current API servers; clusterIP alone
	// comes from older servers and hand-written manifests.
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if ip != "" && ip != corev1.ClusterIPNone {
			out.ClusterIPs = append(out.ClusterIPs, ip)
		}
	}
	return out
}

func convertServicePort(p corev1.ServicePort) model.Port {
	out := model.Port{Name: p.Name, Port: p.Port, Protocol: PortProtocol(p)}
	switch tp := p.TargetPort; {
	case tp.Type == intstr.String && tp.StrVal != "":
		// The API server and the file registry reject numeric strings; a
		// fake or older client might still hand one over, and "8080"
		// plainly means a number.
		if n, err := strconv.ParseInt(tp.StrVal, 10, 32); err == nil && n > 0 && n <= 65535 {
			out.TargetPort = int32(n)
		} else {
			out.TargetPortName = tp.StrVal
		}
	case tp.Type == intstr.Int && tp.IntVal != 0:
		out.TargetPort = tp.IntVal
	default:
		// Unset: Kubernetes defaults the target port to the port.
		out.TargetPort = p.Port
	}
	return out
}

// Ports Istio treats as TCP when nothing names their protocol: detection
// waits for the client's first bytes, and servers on these ports (SMTP,
// DNS, MySQL, MongoDB) are known to break under it.
func isWellKnownTCPPort(port int32) bool {
	switch port {
	case 25, 53, 3306, 27017:
		return true
	}
	return false
}

// PortProtocol applies the protocol rules of DESIGN.md to one service port,
// exactly as Istio does, so that a Service annotated for Istio means the
// same thing here.
func PortProtocol(p corev1.ServicePort) model.Protocol {
	if p.Protocol == corev1.ProtocolUDP {
		return model.UDP
	}
	name := p.Name
	if p.AppProtocol != nil {
		// Istio lets appProtocol replace the name entirely: a port named
		// "http-x" with an unknown appProtocol is not HTTP.
		name = *p.AppProtocol
		switch name {
		case "kubernetes.io/h2c":
			return model.HTTP2
		case "kubernetes.io/ws":
			return model.HTTP
		case "kubernetes.io/wss":
			return model.HTTPS
		}
	}
	// grpc-web contains the separator, so it must be recognised before the
	// name is cut at the first dash. Istio matches it as a prefix.
	const grpcWeb = "grpc-web"
	if len(name) >= len(grpcWeb) && strings.EqualFold(name[:len(grpcWeb)], grpcWeb) {
		return model.GRPCWeb
	}
	if i := strings.IndexByte(name, '-'); i >= 0 {
		name = name[:i]
	}
	if proto := parseProtocolName(name); proto != model.Unsupported {
		return proto
	}
	if isWellKnownTCPPort(p.Port) {
		return model.TCP
	}
	return model.Unsupported
}

func parseProtocolName(name string) model.Protocol {
	switch strings.ToLower(name) {
	case "http":
		return model.HTTP
	case "http2":
		return model.HTTP2
	case "https":
		return model.HTTPS
	case "grpc":
		return model.GRPC
	case "tcp":
		return model.TCP
	case "tls":
		return model.TLS
	case "mongo":
		return model.Mongo
	case "mysql":
		return model.MySQL
	case "redis":
		return model.Redis
	case "udp":
		return model.UDP
	case "http_proxy":
		return model.HTTPProxy
	}
	return model.Unsupported
}

// EndpointHealth: ready (nil counts as ready) is Healthy; not ready but
// serving and terminating is Draining; anything else is Unhealthy. Nil
// serving counts as serving and nil terminating as not terminating, as the
// EndpointSlice API defines them.
func EndpointHealth(c discoveryv1.EndpointConditions) model.Health {
	if c.Ready == nil || *c.Ready {
		return model.Healthy
	}
	serving := c.Serving == nil || *c.Serving
	terminating := c.Terminating != nil && *c.Terminating
	if serving && terminating {
		return model.Draining
	}
	return model.Unhealthy
}

// healthRank orders health from best to worst without relying on the
// numeric values of the model's constants.
func healthRank(h model.Health) int {
	switch h {
	case model.Healthy:
		return 0
	case model.Draining:
		return 1
	}
	return 2
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

// endpointLabels merges the Pod's labels with the locality labels, so that
// selectors written against topology labels match even when the locality
// came from the Node or the Pod's override label rather than the Pod.
func endpointLabels(pod *PodInfo, l model.Locality) map[string]string {
	var podLabels map[string]string
	if pod != nil {
		podLabels = pod.Labels
	}
	if len(podLabels) == 0 && l == (model.Locality{}) {
		return nil
	}
	out := make(map[string]string, len(podLabels)+3)
	maps.Copy(out, podLabels)
	if l.Region != "" {
		out[corev1.LabelTopologyRegion] = l.Region
	}
	if l.Zone != "" {
		out[corev1.LabelTopologyZone] = l.Zone
	}
	if l.Subzone != "" {
		out[subzoneNodeLabel] = l.Subzone
	}
	return out
}

// EndpointLookup finds the objects an endpoint refers to. Any func may be
// nil; any may return nil.
type EndpointLookup struct {
	Pod func(namespace, name string) *PodInfo
	// PodByIP returns PodForIP's choice among the Pods that hold ip.
	PodByIP func(namespace, ip string) *PodInfo
	Node    func(name string) *corev1.Node
}

// podFor finds the Pod behind one address of a slice endpoint. A targetRef
// is trusted over the IP: IPs are reused quickly, so a Pod found by IP
// counts only if it is the one the targetRef names, and a targetRef to
// something other than a Pod means no Pod is behind the address.
func (l EndpointLookup) podFor(ref *corev1.ObjectReference, namespace, address string) *PodInfo {
	if ref != nil {
		if ref.Kind != "Pod" {
			return nil
		}
		ns := cmp.Or(ref.Namespace, namespace)
		if l.Pod != nil {
			if pod := l.Pod(ns, ref.Name); pod != nil {
				return pod
			}
		}
		if l.PodByIP != nil {
			if pod := l.PodByIP(ns, address); pod != nil && pod.Name == ref.Name {
				return pod
			}
		}
		return nil
	}
	if l.PodByIP != nil {
		return l.PodByIP(namespace, address)
	}
	return nil
}

func (l EndpointLookup) node(name string) *corev1.Node {
	if name == "" || l.Node == nil {
		return nil
	}
	return l.Node(name)
}

type matchedSlicePort struct {
	name   string
	number int32
	// stale: the service port's numeric targetPort is another number, so
	// the slice was written for an older spec of the Service.
	stale bool
}

// BuildEndpoints builds the endpoints of svc from all of its
// EndpointSlices (the caller selects them, normally by the
// kubernetes.io/service-name label). The result is sorted by
// (ServicePortName, Address, Port) and does not depend on the order of
// slices.
//
// During a rollout, a slice rebalance or after a change of the Service's
// targetPort, one address briefly appears in two slices, possibly on two
// target ports. As in Istio, each (Address, ServicePortName) is kept once,
// so that a stale slice cannot leave a second copy on an old port. Istio
// keeps an arbitrary copy; here the copy kept is, in order of preference:
// on the port the Service's numeric targetPort names (the other was
// written for an older spec), the healthiest, from the newest slice (by
// creation time), from the first slice by name.
//
// The endpoints of one call are allocated as one block, and those for the
// ports of one address share their Labels map: a service's endpoints are
// replaced together, and the model never mutates them.
//
// An ExternalName service has no endpoints of its own: clients resolve the
// name it points to.
func BuildEndpoints(svc *model.Service, endpointSlices []*discoveryv1.EndpointSlice, lookup EndpointLookup) []*model.Endpoint {
	if svc == nil || svc.Resolution == model.DNSAlias || len(svc.Ports) == 0 {
		return nil
	}
	ordered := sortedSlices(endpointSlices)

	// An upper bound, so that the block is never reallocated.
	n := 0
	for _, s := range ordered {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		perAddress := min(len(s.Ports), len(svc.Ports))
		for i := range s.Endpoints {
			n += len(s.Endpoints[i].Addresses) * perAddress
		}
	}
	if n == 0 {
		return nil
	}

	block := make([]model.Endpoint, 0, n)
	// rank[i] orders the copies of block[i]'s key, lowest kept.
	rank := make([]uint8, 0, n)
	var ports []matchedSlicePort // reused across slices
	for _, s := range ordered {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		ports = matchSlicePorts(ports[:0], svc, s.Ports)
		if len(ports) == 0 {
			continue
		}
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			health := EndpointHealth(e.Conditions)
			for _, addr := range e.Addresses {
				base := describeEndpoint(svc, s, e, addr, health, lookup)
				for _, p := range ports {
					base.Port = uint32(p.number)
					base.ServicePortName = p.name
					block = append(block, base)
					rank = append(rank, copyRank(p.stale, health))
				}
			}
		}
	}

	// Sorting indices, with the index as the last key, keeps the order of
	// slices among equally ranked duplicates without a stable sort: the
	// first of each run is the one to keep.
	order := make([]int32, len(block))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		return cmp.Or(
			compareEndpointKey(&block[i], &block[j]),
			cmp.Compare(rank[i], rank[j]),
			cmp.Compare(i, j),
		)
	})
	out := make([]*model.Endpoint, 0, len(block))
	for _, i := range order {
		ep := &block[i]
		if len(out) > 0 && compareEndpointKey(out[len(out)-1], ep) == 0 {
			continue
		}
		out = append(out, ep)
	}
	return out
}

// copyRank orders copies of one endpoint: any copy on the Service's
// target port before a stale one, then by health.
func copyRank(stale bool, h model.Health) uint8 {
	r := uint8(healthRank(h))
	if stale {
		r += 4
	}
	return r
}

// compareEndpointKey compares what makes endpoints duplicates: (service
// port name, address). It uses strings.Compare, one pass over the bytes
// where cmp.Compare may take two: sorting is a large part of
// BuildEndpoints.
func compareEndpointKey(a, b *model.Endpoint) int {
	if c := strings.Compare(a.ServicePortName, b.ServicePortName); c != 0 {
		return c
	}
	return strings.Compare(a.Address, b.Address)
}

// sortedSlices orders slices newest first (by creation time), then by
// namespace and name, so that ties between duplicates are broken the same
// way whatever order the lister returned.
func sortedSlices(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int {
		return cmp.Or(
			b.CreationTimestamp.Compare(a.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name))
	})
	return out
}

// matchSlicePorts appends the slice ports that serve a port of svc. Slice
// ports carry the service port's name (nil for an unnamed port) and the
// resolved workload port.
func matchSlicePorts(dst []matchedSlicePort, svc *model.Service, ports []discoveryv1.EndpointPort) []matchedSlicePort {
	for _, sp := range ports {
		if sp.Port == nil {
			// The slice controller leaves the number unset when a named
			// target port cannot be resolved; there is nothing to dial.
			continue
		}
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		for _, p := range svc.Ports {
			if p.Name == name {
				stale := p.TargetPort != 0 && p.TargetPort != *sp.Port
				dst = append(dst, matchedSlicePort{name: name, number: *sp.Port, stale: stale})
				break
			}
		}
	}
	return dst
}

func describeEndpoint(svc *model.Service, s *discoveryv1.EndpointSlice, e *discoveryv1.Endpoint,
	addr string, health model.Health, lookup EndpointLookup,
) model.Endpoint {
	ns := cmp.Or(s.Namespace, svc.Namespace)
	pod := lookup.podFor(e.TargetRef, ns, addr)

	out := model.Endpoint{Address: addr, Health: health, Namespace: svc.Namespace}
	if pod != nil {
		out.PodName = pod.Name
		out.NodeName = pod.NodeName
		out.ServiceAccount = pod.ServiceAccount
	} else if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
		out.PodName = e.TargetRef.Name
	}
	if out.NodeName == "" && e.NodeName != nil {
		out.NodeName = *e.NodeName
	}

	var node *corev1.Node
	if podLocalityLabel(pod) == "" {
		node = lookup.node(out.NodeName)
	}
	out.Locality = Locality(pod, node, e.Zone)
	out.Labels = endpointLabels(pod, out.Locality)
	return out
}

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
