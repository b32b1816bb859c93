package kubeconv

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StrippedService returns a new Service holding only what meshpilot reads
// of svc: name, namespace, uid, resourceVersion, labels, the
// networking.istio.io/exportTo annotation, and of the spec the type,
// cluster IPs, external name, selector, traffic policies and, of each
// port, its name, protocol, app protocol, port and target port. nil gives
// nil. It shares svc's label and selector maps; applied to its own
// result it gives an equal Service.
func StrippedService(svc *corev1.Service) *corev1.Service {
	if svc == nil {
		return nil
	}
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            svc.Name,
			Namespace:       names.str(svc.Namespace),
			UID:             svc.UID,
			ResourceVersion: svc.ResourceVersion,
			Labels:          svc.Labels,
			Annotations:     keptServiceAnnotations(svc.Annotations),
		},
		Spec: corev1.ServiceSpec{
			Type:                  names.typ(svc.Spec.Type),
			ClusterIP:             svc.Spec.ClusterIP,
			ClusterIPs:            svc.Spec.ClusterIPs,
			ExternalName:          svc.Spec.ExternalName,
			Selector:              svc.Spec.Selector,
			InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
			TrafficDistribution:   svc.Spec.TrafficDistribution,
		},
	}
	// A selector is most often the Service's own labels: one map then
	// serves both.
	if len(out.Labels) > 0 && maps.Equal(out.Labels, out.Spec.Selector) {
		out.Spec.Selector = out.Labels
	}
	// clusterIP repeats clusterIPs[0] on every current server.
	if ips := out.Spec.ClusterIPs; len(ips) > 0 && ips[0] == out.Spec.ClusterIP {
		out.Spec.ClusterIP = ips[0]
	}
	if len(svc.Spec.Ports) > 0 {
		out.Spec.Ports = make([]corev1.ServicePort, len(svc.Spec.Ports))
		for i, p := range svc.Spec.Ports {
			out.Spec.Ports[i] = corev1.ServicePort{
				Name:        names.str(p.Name),
				Protocol:    corev1.Protocol(names.str(string(p.Protocol))),
				AppProtocol: p.AppProtocol,
				Port:        p.Port,
				TargetPort:  p.TargetPort,
			}
		}
	}
	return out
}

// keptServiceAnnotations keeps the annotations conversion reads.
func keptServiceAnnotations(ann map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{ExportToAnnotation, CanonicalServiceAccountsAnnotation} {
		if v, ok := ann[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	if len(out) == len(ann) {
		return ann
	}
	return out
}

// typ shares the service type's string.
func (t *stringTable) typ(s corev1.ServiceType) corev1.ServiceType {
	return corev1.ServiceType(t.str(string(s)))
}

// StrippedEndpointSlice returns a new EndpointSlice holding only what
// meshpilot reads of s: name, namespace, uid, resourceVersion, creation
// time, the kubernetes.io/service-name label, the address type, each
// port's name and number, and of each endpoint its addresses, conditions,
// node name, zone and the kind, namespace and name of its target. nil
// gives nil. It shares s's address lists; applied to its own result it
// gives an equal slice.
func StrippedEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if s == nil {
		return nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:              s.Name,
			Namespace:         names.str(s.Namespace),
			UID:               s.UID,
			ResourceVersion:   s.ResourceVersion,
			CreationTimestamp: s.CreationTimestamp,
			Labels:            keptSliceLabels(s.Labels),
		},
		AddressType: discoveryv1.AddressType(names.str(string(s.AddressType))),
	}
	if len(s.Ports) > 0 {
		out.Ports = make([]discoveryv1.EndpointPort, len(s.Ports))
		for i, p := range s.Ports {
			out.Ports[i] = discoveryv1.EndpointPort{Name: names.ptr(p.Name), Port: p.Port}
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			out.Endpoints[i] = discoveryv1.Endpoint{
				Addresses: e.Addresses,
				Conditions: discoveryv1.EndpointConditions{
					Ready:       boolPtr(e.Conditions.Ready),
					Serving:     boolPtr(e.Conditions.Serving),
					Terminating: boolPtr(e.Conditions.Terminating),
				},
				TargetRef: keptTargetRef(e.TargetRef),
				NodeName:  names.ptr(e.NodeName),
				Zone:      names.ptr(e.Zone),
			}
		}
	}
	return out
}

// keptSliceLabels keeps the label that ties a slice to its Service.
func keptSliceLabels(labels map[string]string) map[string]string {
	v, ok := labels[discoveryv1.LabelServiceName]
	if !ok {
		return nil
	}
	if len(labels) == 1 {
		return labels
	}
	return map[string]string{discoveryv1.LabelServiceName: v}
}

// keptTargetRef keeps what finds the Pod behind an address.
func keptTargetRef(ref *corev1.ObjectReference) *corev1.ObjectReference {
	if ref == nil {
		return nil
	}
	return &corev1.ObjectReference{Kind: names.str(ref.Kind), Namespace: names.str(ref.Namespace), Name: ref.Name}
}
