package parity

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/modelcase"
)

// objects are a case written as a cluster holds it: what meshpilot's and
// istiod's Kubernetes registries both read back into their models.
type objects struct {
	Namespaces []*corev1.Namespace
	Nodes      []*corev1.Node
	// Pods are created, then given their status (IP, Running, Ready).
	Pods           []*corev1.Pod
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
}

// notComparable says why a case cannot be written into one cluster, or
// "" when it can.
func notComparable(in *modelcase.Input) string {
	if len(in.PeerAuthentications)+len(in.AuthorizationPolicies) > 0 {
		return "the case's security policies are in the model's form, which the harness does not write as Istio's objects"
	}
	if len(in.HTTPRoutes)+len(in.GRPCRoutes)+len(in.ReferenceGrants) > 0 {
		return "the case's Gateway API routes: the harness does not install the Gateway API's CRDs nor write them"
	}
	for _, s := range in.Services {
		if s.Source != "" {
			return fmt.Sprintf("service %s/%s comes from source %q: a case of several registries has no form in one cluster", s.Namespace, s.Name, s.Source)
		}
		for _, e := range s.Endpoints {
			if e.Cluster != "" {
				return fmt.Sprintf("an endpoint of %s/%s is in cluster %q: remote clusters are not part of the harness", s.Namespace, s.Name, e.Cluster)
			}
		}
	}
	return ""
}

// manifests writes a case's services as Kubernetes objects: a Service
// per service (its ports' protocols as appProtocol, its exportTo as
// Istio's annotation), an EndpointSlice per port of its endpoints, a
// Pod behind each endpoint address (the endpoint's labels and service
// account), and a Node per locality or node name (the locality as the
// topology labels both registries read).
func manifests(in *modelcase.Input) (*objects, error) {
	o := &objects{}
	namespaces := map[string]bool{"istio-system": true}
	nodes := map[string]*corev1.Node{}
	pods := map[string]*corev1.Pod{} // by namespace/address
	for _, s := range in.Services {
		namespaces[s.Namespace] = true
		svc, err := service(s)
		if err != nil {
			return nil, err
		}
		o.Services = append(o.Services, svc)
		type slot struct {
			name string
			port uint32
		}
		slices_ := map[slot]*discoveryv1.EndpointSlice{}
		var order []slot
		for i, e := range s.Endpoints {
			k := slot{e.PortName, e.Port}
			sl := slices_[k]
			if sl == nil {
				sl = &discoveryv1.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: s.Namespace,
						Name:      fmt.Sprintf("%s-%d", s.Name, len(order)),
						Labels: map[string]string{
							discoveryv1.LabelServiceName: s.Name,
							discoveryv1.LabelManagedBy:   "parity.meshpilot.io",
						},
					},
					AddressType: addressType(e.Address),
					Ports: []discoveryv1.EndpointPort{{
						Name: &k.name, Port: new(int32(k.port)), Protocol: new(corev1.ProtocolTCP),
					}},
				}
				slices_[k] = sl
				order = append(order, k)
			}
			node := nodeFor(nodes, e.Node, e.Locality)
			pod := pods[s.Namespace+"/"+e.Address]
			if pod == nil {
				pod = &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: s.Namespace,
						Name:      cmp.Or(e.Pod, fmt.Sprintf("%s-%d", s.Name, i)),
						Labels:    e.Labels,
					},
					Spec: corev1.PodSpec{
						ServiceAccountName: e.ServiceAccount,
						NodeName:           node,
						Containers:         []corev1.Container{{Name: "app", Image: "app"}},
					},
					Status: corev1.PodStatus{
						Phase:      corev1.PodRunning,
						PodIP:      e.Address,
						PodIPs:     []corev1.PodIP{{IP: e.Address}},
						Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
					},
				}
				pods[s.Namespace+"/"+e.Address] = pod
				o.Pods = append(o.Pods, pod)
			}
			ready, serving, terminating := true, true, false
			switch e.Health {
			case "", "HEALTHY":
			case "UNHEALTHY":
				ready, serving = false, false
			case "DRAINING":
				ready, terminating = false, true
			default:
				return nil, fmt.Errorf("service %s/%s: unknown health %q", s.Namespace, s.Name, e.Health)
			}
			ep := discoveryv1.Endpoint{
				Addresses:  []string{e.Address},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: s.Namespace, Name: pod.Name},
			}
			if node != "" {
				ep.NodeName = new(node)
				if z := model.ParseLocality(e.Locality).Zone; z != "" {
					ep.Zone = new(z)
				}
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		for _, k := range order {
			o.EndpointSlices = append(o.EndpointSlices, slices_[k])
		}
	}
	for _, r := range in.DestinationRules {
		namespaces[r.Namespace] = true
	}
	for _, v := range in.VirtualServices {
		namespaces[v.Namespace] = true
	}
	for _, v := range in.ServiceEntries {
		namespaces[v.Namespace] = true
	}
	for _, v := range in.WorkloadEntries {
		namespaces[v.Namespace] = true
	}
	for _, c := range in.Clients {
		if ns := c.Metadata["NAMESPACE"]; ns != "" {
			namespaces[ns] = true
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		o.Namespaces = append(o.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		o.Nodes = append(o.Nodes, nodes[n])
	}
	return o, nil
}

// service is the Kubernetes Service of a case's service. Its endpoints
// are written as slices of its own (no selector), as a selector would
// let no controller write them here: the API server runs alone.
func service(s modelcase.Service) (*corev1.Service, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
	}
	if len(s.ExportTo) > 0 {
		svc.Annotations = map[string]string{"networking.istio.io/exportTo": strings.Join(s.ExportTo, ",")}
	}
	switch s.Resolution {
	case "", "ClientSideLB":
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	case "Passthrough":
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	case "DNSAlias":
		svc.Spec.Type = corev1.ServiceTypeExternalName
		svc.Spec.ExternalName = s.ExternalName
	default:
		return nil, fmt.Errorf("service %s/%s: unknown resolution %q", s.Namespace, s.Name, s.Resolution)
	}
	switch s.InternalTrafficPolicy {
	case "", "Cluster":
	case "Local":
		svc.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal)
	default:
		return nil, fmt.Errorf("service %s/%s: unknown internalTrafficPolicy %q", s.Namespace, s.Name, s.InternalTrafficPolicy)
	}
	if s.TrafficDistribution != "" {
		svc.Spec.TrafficDistribution = new(s.TrafficDistribution)
	}
	if len(s.Selector) > 0 {
		// A selector selects WorkloadEntries in a case; Pods behind it
		// are the case's endpoints, written by hand.
		svc.Spec.Selector = s.Selector
	}
	for _, p := range s.Ports {
		sp := corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: corev1.ProtocolTCP}
		if p.Protocol == model.UDP {
			sp.Protocol = corev1.ProtocolUDP
		} else if ap := appProtocol(p.Protocol); ap != "" {
			sp.AppProtocol = new(ap)
		}
		switch {
		case p.TargetPortName != "":
			sp.TargetPort = intstr.FromString(p.TargetPortName)
		case p.TargetPort != 0:
			sp.TargetPort = intstr.FromInt32(p.TargetPort)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	return svc, nil
}

// appProtocol is the appProtocol both registries read as the protocol
// (Istio's names are its protocols' in lower case).
func appProtocol(p model.Protocol) string {
	if p == "" || p == model.Unsupported {
		return ""
	}
	return strings.ToLower(string(p))
}

func addressType(addr string) discoveryv1.AddressType {
	if strings.Contains(addr, ":") {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// nodeFor returns the name of the node of an endpoint, adding it to nodes
// with its locality's topology labels: the node's name as given, else
// one per locality; "" when the endpoint has neither.
func nodeFor(nodes map[string]*corev1.Node, name, locality string) string {
	if name == "" && locality == "" {
		return ""
	}
	l := model.ParseLocality(locality)
	if name == "" {
		name = strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace("node-" + locality))
	}
	if n := nodes[name]; n != nil {
		return name
	}
	labels := map[string]string{corev1.LabelHostname: name}
	if l.Region != "" {
		labels[corev1.LabelTopologyRegion] = l.Region
	}
	if l.Zone != "" {
		labels[corev1.LabelTopologyZone] = l.Zone
	}
	if l.Subzone != "" {
		labels["topology.istio.io/subzone"] = l.Subzone
	}
	nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	return name
}
