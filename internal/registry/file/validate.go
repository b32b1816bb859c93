package file

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks below follow the API server's validation (Kubernetes 1.37) of
// the fields meshpilot reads, so that a folder that loads here would also
// be accepted by a cluster, and one a cluster refuses is refused here.
// TestVerdictsAgreeWithTheAPIServer holds both to the real API server.
// Deliberate differences, each a case of that test:
//   - endpoint addresses may be loopback, so that a folder can describe
//     servers on 127.0.0.x;
//   - fields meshpilot does not read are decoded (names and types) but
//     their values are not checked: a Pod needs no containers;
//   - stricter, because the mistake would silently serve nothing: a Pod
//     phase must be a known one, an EndpointSlice port must be 1-65535,
//     a slice must name its Service and that Service must be in the
//     folder (registry.go);
//   - stricter: kinds other than Namespace, Service, EndpointSlice, Pod,
//     Node and Istio's DestinationRule, VirtualService, ServiceEntry and
//     WorkloadEntry are refused, not ignored, and so is an object defined
//     twice in one file, which kubectl would apply twice, the second
//     winning (parse.go).
//
// The Istio kinds are checked against their CRDs' schemas as the API
// server checks them (istio_decode.go, istio_validate.go).

var metadataPath = field.NewPath("metadata")

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	return apivalidation.ValidateObjectMeta(&ns.ObjectMeta, false, apivalidation.NameIsDNSLabel, metadataPath)
}

func validateNode(n *corev1.Node) field.ErrorList {
	return apivalidation.ValidateObjectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metadataPath)
}

var protocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}

func validProtocol(p corev1.Protocol) bool {
	return p == corev1.ProtocolTCP || p == corev1.ProtocolUDP || p == corev1.ProtocolSCTP
}

func validatePortNumber(port int, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port) {
		errs = append(errs, field.Invalid(fld, port, msg))
	}
	return errs
}

func validateDNSLabel(v string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}

func validateDNSSubdomain(v string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}

// validateAppProtocol: appProtocol is a qualified name, like a label key.
func validateAppProtocol(v *string, fld *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return metav1validation.ValidateLabelName(*v, fld)
}

// isHeadless is the API server's test: "None" as the only cluster IP.
func isHeadless(svc *corev1.Service) bool {
	if len(svc.Spec.ClusterIPs) > 0 {
		return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
	}
	return svc.Spec.ClusterIP == corev1.ClusterIPNone
}

func validateService(svc *corev1.Service) field.ErrorList {
	// Service names are DNS-1123 labels since Kubernetes 1.36 (KEP-5311);
	// they were DNS-1035 labels, which may not start with a digit.
	errs := apivalidation.ValidateObjectMeta(&svc.ObjectMeta, true, apivalidation.NameIsDNSLabel, metadataPath)
	spec := field.NewPath("spec")

	switch svc.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(svc.Spec.Ports) == 0 && !isHeadless(svc) {
			errs = append(errs, field.Required(spec.Child("ports"), "a Service needs at least one port"))
		}
	case corev1.ServiceTypeExternalName:
		name := strings.TrimSuffix(svc.Spec.ExternalName, ".")
		if name == "" {
			errs = append(errs, field.Required(spec.Child("externalName"), "an ExternalName Service needs the DNS name it stands for"))
		} else {
			errs = append(errs, validateDNSSubdomain(name, spec.Child("externalName"))...)
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), svc.Spec.Type,
			[]corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName}))
	}

	names := map[string]bool{}
	type portKey struct {
		port     int32
		protocol corev1.Protocol
	}
	ports := map[portKey]bool{}
	for i, p := range svc.Spec.Ports {
		fld := spec.Child("ports").Index(i)
		switch {
		case p.Name == "" && len(svc.Spec.Ports) > 1:
			errs = append(errs, field.Required(fld.Child("name"), "every port needs a name when a Service has several"))
		case p.Name != "":
			errs = append(errs, validateDNSLabel(p.Name, fld.Child("name"))...)
			if names[p.Name] {
				errs = append(errs, field.Duplicate(fld.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		errs = append(errs, validatePortNumber(int(p.Port), fld.Child("port"))...)
		protocol := p.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		if !validProtocol(protocol) {
			errs = append(errs, field.NotSupported(fld.Child("protocol"), p.Protocol, protocols))
		}
		key := portKey{p.Port, protocol}
		if ports[key] {
			errs = append(errs, field.Duplicate(fld, fmt.Sprintf("%d/%s", p.Port, protocol)))
		}
		ports[key] = true
		errs = append(errs, validateTargetPort(p.TargetPort, fld.Child("targetPort"))...)
		if p.NodePort != 0 {
			errs = append(errs, validatePortNumber(int(p.NodePort), fld.Child("nodePort"))...)
		}
		errs = append(errs, validateAppProtocol(p.AppProtocol, fld.Child("appProtocol"))...)
	}

	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		errs = append(errs, validation.IsValidIPForLegacyField(spec.Child("clusterIP"), ip, true, nil)...)
	}
	for i, ip := range svc.Spec.ClusterIPs {
		fld := spec.Child("clusterIPs").Index(i)
		switch {
		case ip == corev1.ClusterIPNone:
			if i > 0 || len(svc.Spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(fld, ip, `"None" must be the only entry`))
			}
		default:
			errs = append(errs, validation.IsValidIPForLegacyField(fld, ip, true, nil)...)
		}
	}
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
		errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0], "must match spec.clusterIP"))
	}
	errs = append(errs, metav1validation.ValidateLabels(svc.Spec.Selector, spec.Child("selector"))...)
	if p := svc.Spec.InternalTrafficPolicy; p != nil && !slices.Contains(internalTrafficPolicies, *p) {
		errs = append(errs, field.NotSupported(spec.Child("internalTrafficPolicy"), *p, internalTrafficPolicies))
	}
	if d := svc.Spec.TrafficDistribution; d != nil && !slices.Contains(trafficDistributions, *d) {
		errs = append(errs, field.NotSupported(spec.Child("trafficDistribution"), *d, trafficDistributions))
	}
	return errs
}

// The values the API server takes, whatever the Service's type; it warns
// about PreferClose (deprecated, PreferSameZone's former name) but stores
// it.
var (
	internalTrafficPolicies = []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}
	trafficDistributions    = []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}
)

func validateTargetPort(tp intstr.IntOrString, fld *field.Path) field.ErrorList {
	switch tp.Type {
	case intstr.Int:
		if tp.IntVal == 0 {
			return nil // unset: the port itself
		}
		return validatePortNumber(int(tp.IntVal), fld)
	default:
		if tp.StrVal == "" {
			return nil
		}
		if _, err := strconv.Atoi(tp.StrVal); err == nil {
			return field.ErrorList{field.Invalid(fld, tp.StrVal, "a port number must not be quoted: write "+tp.StrVal+", or name a container port")}
		}
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortName(tp.StrVal) {
			errs = append(errs, field.Invalid(fld, tp.StrVal, msg))
		}
		return errs
	}
}

var podPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	spec := field.NewPath("spec")
	if pod.Spec.NodeName != "" {
		errs = append(errs, validateDNSSubdomain(pod.Spec.NodeName, spec.Child("nodeName"))...)
	}
	if pod.Spec.ServiceAccountName != "" {
		errs = append(errs, validateDNSSubdomain(pod.Spec.ServiceAccountName, spec.Child("serviceAccountName"))...)
	}
	status := field.NewPath("status")
	if ph := pod.Status.Phase; ph != "" {
		ok := false
		for _, p := range podPhases {
			ok = ok || p == ph
		}
		if !ok {
			errs = append(errs, field.NotSupported(status.Child("phase"), ph, podPhases))
		}
	}
	if pod.Status.PodIP != "" {
		errs = append(errs, validation.IsValidIPForLegacyField(status.Child("podIP"), pod.Status.PodIP, true, nil)...)
	}
	families := map[bool]bool{}
	for i, ip := range pod.Status.PodIPs {
		fld := status.Child("podIPs").Index(i).Child("ip")
		ipErrs := validation.IsValidIPForLegacyField(fld, ip.IP, true, nil)
		errs = append(errs, ipErrs...)
		if len(ipErrs) > 0 {
			continue
		}
		addr, _ := netip.ParseAddr(ip.IP)
		if families[addr.Is4()] {
			errs = append(errs, field.Invalid(fld, ip.IP, "only one IP per family is allowed"))
		}
		families[addr.Is4()] = true
	}
	if pod.Status.PodIP != "" && len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		errs = append(errs, field.Invalid(status.Child("podIPs").Index(0).Child("ip"), pod.Status.PodIPs[0].IP, "must match status.podIP"))
	}
	return errs
}

// The API server's limits.
const (
	maxSliceEndpoints = 1000
	maxSliceAddresses = 100
	maxSlicePorts     = 20000
)

var addressTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)

	label := metadataPath.Child("labels").Key(discoveryv1.LabelServiceName)
	switch svc, ok := s.Labels[discoveryv1.LabelServiceName]; {
	case !ok || svc == "":
		errs = append(errs, field.Required(label, "names the Service whose endpoints these are"))
	default:
		for _, msg := range validation.IsDNS1123Label(svc) {
			errs = append(errs, field.Invalid(label, svc, "not a Service name: "+msg))
		}
	}

	typeOK := false
	for _, t := range addressTypes {
		typeOK = typeOK || s.AddressType == t
	}
	if s.AddressType == "" {
		errs = append(errs, field.Required(field.NewPath("addressType"), "IPv4, IPv6 or FQDN"))
	} else if !typeOK {
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, addressTypes))
	}

	eps := field.NewPath("endpoints")
	if len(s.Endpoints) > maxSliceEndpoints {
		errs = append(errs, field.TooMany(eps, len(s.Endpoints), maxSliceEndpoints))
	}
	for i, e := range s.Endpoints {
		fld := eps.Index(i)
		if len(e.Addresses) == 0 {
			errs = append(errs, field.Required(fld.Child("addresses"), "an endpoint needs one address"))
		} else if len(e.Addresses) > maxSliceAddresses {
			errs = append(errs, field.TooMany(fld.Child("addresses"), len(e.Addresses), maxSliceAddresses))
		}
		for j, a := range e.Addresses {
			if typeOK {
				errs = append(errs, validateEndpointAddress(a, s.AddressType, fld.Child("addresses").Index(j))...)
			}
		}
		if e.Hostname != nil {
			errs = append(errs, validateDNSLabel(*e.Hostname, fld.Child("hostname"))...)
		}
		if e.NodeName != nil {
			errs = append(errs, validateDNSSubdomain(*e.NodeName, fld.Child("nodeName"))...)
		}
		// targetRef is not checked: the API server takes any, and a
		// reference to no Pod finds none, as in a cluster.
	}

	ports := field.NewPath("ports")
	if len(s.Ports) > maxSlicePorts {
		errs = append(errs, field.TooMany(ports, len(s.Ports), maxSlicePorts))
	}
	names := map[string]bool{}
	for i, p := range s.Ports {
		fld := ports.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			errs = append(errs, validateDNSLabel(name, fld.Child("name"))...)
		}
		if names[name] {
			errs = append(errs, field.Duplicate(fld.Child("name"), name))
		}
		names[name] = true
		if p.Port != nil {
			errs = append(errs, validatePortNumber(int(*p.Port), fld.Child("port"))...)
		}
		if p.Protocol != nil && !validProtocol(*p.Protocol) {
			errs = append(errs, field.NotSupported(fld.Child("protocol"), *p.Protocol, protocols))
		}
		errs = append(errs, validateAppProtocol(p.AppProtocol, fld.Child("appProtocol"))...)
	}
	return errs
}

// validateEndpointAddress checks one address as the API server does,
// except that loopback addresses are allowed.
func validateEndpointAddress(a string, t discoveryv1.AddressType, fld *field.Path) field.ErrorList {
	if t == discoveryv1.AddressTypeFQDN {
		return validation.IsFullyQualifiedDomainName(fld, a)
	}
	errs := validation.IsValidIPForLegacyField(fld, a, true, nil)
	if len(errs) > 0 {
		return errs
	}
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return field.ErrorList{field.Invalid(fld, a, "must be a valid IP address")}
	}
	switch {
	case t == discoveryv1.AddressTypeIPv4 && !addr.Is4():
		return field.ErrorList{field.Invalid(fld, a, "must be an IPv4 address (addressType is IPv4)")}
	case t == discoveryv1.AddressTypeIPv6 && !addr.Is6():
		return field.ErrorList{field.Invalid(fld, a, "must be an IPv6 address (addressType is IPv6)")}
	case addr.IsUnspecified():
		return field.ErrorList{field.Invalid(fld, a, "may not be unspecified (0.0.0.0 or ::)")}
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(fld, a, "may not be in the link-local range")}
	case addr.IsMulticast():
		return field.ErrorList{field.Invalid(fld, a, "may not be a multicast address")}
	}
	return nil
}
