package kubeconv

import (
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshpilot/meshpilot/internal/model"
)

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
		// Kept for the WorkloadEntries a Service selects (Istio's rule);
		// the Pods it selects come through its EndpointSlices.
		Selector: model.Labels(maps.Clone(svc.Spec.Selector)),
		// Read whatever the type, as Istio does: they matter only where
		// there are endpoints, which an ExternalName Service has none of.
		InternalTrafficPolicy: internalTrafficPolicy(svc.Spec.InternalTrafficPolicy),
		TrafficDistribution:   trafficDistribution(svc.Spec.TrafficDistribution),
		ExportTo:              exportTo(svc.Annotations),
		ServiceAccounts:       canonicalServiceAccounts(svc.Annotations),
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

// internalTrafficPolicy reads spec.internalTrafficPolicy. Unset is
// Cluster: the API server defaults it so for every type but ExternalName,
// and a hand-written manifest may leave it out.
func internalTrafficPolicy(p *corev1.ServiceInternalTrafficPolicy) model.InternalTrafficPolicy {
	if p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
		return model.InternalTrafficLocal
	}
	return model.InternalTrafficCluster
}

// trafficDistribution reads spec.trafficDistribution. PreferClose is
// PreferSameZone's former name, with the same meaning (deprecated: the API
// server warns). A value this version does not know is no preference, as
// in Istio: the field is a hint.
func trafficDistribution(d *string) model.TrafficDistribution {
	if d == nil {
		return model.TrafficDistributionAny
	}
	switch *d {
	case corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferClose:
		return model.PreferSameZone
	case corev1.ServiceTrafficDistributionPreferSameNode:
		return model.PreferSameNode
	}
	return model.TrafficDistributionAny
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

// PortProtocol gives one service port its protocol exactly as Istio does,
// so that a Service annotated for Istio means the same thing here: UDP is
// UDP; otherwise appProtocol, when set, replaces the port name, whose
// prefix names the protocol (grpc-web, else the part before the first
// "-"), and a port that names none is TCP when it is a well-known TCP
// port (isWellKnownTCPPort).
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

// ProtocolByName reads a protocol written out in full, as a
// ServiceEntry's ports name it ("HTTP", "GRPC", "GRPC-WEB", case aside);
// anything else is Unsupported, as in Istio.
func ProtocolByName(name string) model.Protocol {
	if strings.EqualFold(name, "grpc-web") {
		return model.GRPCWeb
	}
	return parseProtocolName(name)
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
