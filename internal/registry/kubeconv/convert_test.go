package kubeconv_test

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

const (
	cvLabelRegion  = "topology.kubernetes.io/region"
	cvLabelZone    = "topology.kubernetes.io/zone"
	cvLabelSubzone = "topology.istio.io/subzone"
	// The deprecated node labels Istio still reads when the GA ones are
	// absent.
	cvLabelBetaRegion = "failure-domain.beta.kubernetes.io/region"
	cvLabelBetaZone   = "failure-domain.beta.kubernetes.io/zone"
	// The pod labels that override the node's locality, newest first.
	cvLabelLocality       = "topology.istio.io/locality"
	cvLabelLegacyLocality = "istio-locality"
)

func TestPortProtocol(t *testing.T) {
	tests := []struct {
		desc     string
		port     int32
		name     string
		proto    corev1.Protocol
		appProto *string
		want     model.Protocol
	}{
		// Kubernetes protocol.
		{desc: "UDP beats an HTTP name", port: 80, name: "http", proto: corev1.ProtocolUDP, want: model.UDP},
		{desc: "UDP beats appProtocol", port: 80, proto: corev1.ProtocolUDP, appProto: new("kubernetes.io/h2c"), want: model.UDP},
		{desc: "UDP on a well-known port", port: 53, name: "dns", proto: corev1.ProtocolUDP, want: model.UDP},
		{desc: "explicit TCP uses the name", port: 443, name: "https", proto: corev1.ProtocolTCP, want: model.HTTPS},
		{desc: "SCTP is not special, as in Istio", port: 80, name: "http", proto: corev1.ProtocolSCTP, want: model.HTTP},

		// Port names.
		{desc: "http", port: 80, name: "http", want: model.HTTP},
		{desc: "http with suffix", port: 80, name: "http-web", want: model.HTTP},
		{desc: "case-insensitive", port: 80, name: "HTTP-Web", want: model.HTTP},
		{desc: "http2", port: 80, name: "http2", want: model.HTTP2},
		{desc: "https with suffix", port: 443, name: "https-admin", want: model.HTTPS},
		{desc: "grpc", port: 9090, name: "grpc", want: model.GRPC},
		{desc: "grpc with suffix", port: 9090, name: "grpc-api", want: model.GRPC},
		{desc: "grpc-web", port: 8080, name: "grpc-web", want: model.GRPCWeb},
		{desc: "grpc-web with suffix", port: 8080, name: "grpc-web-ui", want: model.GRPCWeb},
		{desc: "grpc-web any case", port: 8080, name: "GRPC-Web", want: model.GRPCWeb},
		{desc: "grpc-web is a prefix match, as in Istio", port: 8080, name: "grpc-webui", want: model.GRPCWeb},
		{desc: "grpcweb is not grpc-web", port: 8080, name: "grpcweb-x", want: model.Unsupported},
		{desc: "tcp", port: 9000, name: "tcp-db", want: model.TCP},
		{desc: "tls", port: 9443, name: "tls", want: model.TLS},
		{desc: "mongo", port: 9017, name: "mongo", want: model.Mongo},
		{desc: "mysql", port: 9306, name: "mysql-primary", want: model.MySQL},
		{desc: "redis", port: 6379, name: "redis-cache", want: model.Redis},
		{desc: "udp name on a TCP port", port: 9999, name: "udp-stats", want: model.UDP},
		{desc: "http_proxy", port: 3128, name: "http_proxy", want: model.HTTPProxy},
		{desc: "http-proxy is http", port: 3128, name: "http-proxy", want: model.HTTP},
		{desc: "unnamed", port: 80, want: model.Unsupported},
		{desc: "unknown name", port: 80, name: "web", want: model.Unsupported},
		{desc: "known name without separator is not a prefix", port: 80, name: "httpx", want: model.Unsupported},
		{desc: "leading dash", port: 80, name: "-http", want: model.Unsupported},
		{desc: "mongodb is not mongo", port: 9017, name: "mongodb", want: model.Unsupported},

		// Well-known ports.
		{desc: "SMTP unnamed", port: 25, want: model.TCP},
		{desc: "DNS unnamed", port: 53, want: model.TCP},
		{desc: "MySQL unknown name", port: 3306, name: "db", want: model.TCP},
		{desc: "MongoDB unknown name", port: 27017, name: "mongodb", want: model.TCP},
		{desc: "name beats well-known port", port: 3306, name: "http", want: model.HTTP},
		{desc: "mysql name on 3306", port: 3306, name: "mysql", want: model.MySQL},

		// appProtocol.
		{desc: "h2c", port: 80, name: "tcp", appProto: new("kubernetes.io/h2c"), want: model.HTTP2},
		{desc: "ws", port: 80, name: "tcp", appProto: new("kubernetes.io/ws"), want: model.HTTP},
		{desc: "wss", port: 443, name: "tcp", appProto: new("kubernetes.io/wss"), want: model.HTTPS},
		{desc: "Kubernetes names are case-sensitive", port: 80, appProto: new("kubernetes.io/H2C"), want: model.Unsupported},
		{desc: "appProtocol beats name", port: 80, name: "http", appProto: new("grpc"), want: model.GRPC},
		{desc: "appProtocol any case", port: 80, name: "tcp", appProto: new("HTTP"), want: model.HTTP},
		{desc: "appProtocol grpc-web", port: 80, appProto: new("grpc-web"), want: model.GRPCWeb},
		{desc: "appProtocol prefix", port: 80, appProto: new("http2-cleartext"), want: model.HTTP2},
		{desc: "unknown appProtocol hides a known name", port: 80, name: "http", appProto: new("example.com/custom"), want: model.Unsupported},
		{desc: "empty appProtocol hides a known name", port: 80, name: "http", appProto: new(""), want: model.Unsupported},
		{desc: "unknown appProtocol on a well-known port", port: 3306, name: "mysql", appProto: new("example.com/sql"), want: model.TCP},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := corev1.ServicePort{Name: tt.name, Port: tt.port, Protocol: tt.proto, AppProtocol: tt.appProto}
			if got := kubeconv.PortProtocol(p); got != tt.want {
				t.Errorf("PortProtocol(%+v) = %s, want %s", p, got, tt.want)
			}
		})
	}
}

func TestEndpointHealth(t *testing.T) {
	yes, no := new(true), new(false)
	tests := []struct {
		desc                        string
		ready, serving, terminating *bool
		want                        model.Health
	}{
		{"all unset", nil, nil, nil, model.Healthy},
		{"ready", yes, nil, nil, model.Healthy},
		{"ready wins over terminating", yes, yes, yes, model.Healthy},
		{"ready unset but terminating", nil, no, yes, model.Healthy},
		{"not ready", no, nil, nil, model.Unhealthy},
		{"not ready, not serving", no, no, nil, model.Unhealthy},
		{"not ready, serving, not terminating", no, yes, no, model.Unhealthy},
		{"not ready, serving, terminating unset", no, yes, nil, model.Unhealthy},
		{"not ready, serving, terminating", no, yes, yes, model.Draining},
		{"not ready, serving unset, terminating", no, nil, yes, model.Draining},
		{"not ready, not serving, terminating", no, no, yes, model.Unhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c := discoveryv1.EndpointConditions{Ready: tt.ready, Serving: tt.serving, Terminating: tt.terminating}
			if got := kubeconv.EndpointHealth(c); got != tt.want {
				t.Errorf("EndpointHealth = %s, want %s", got, tt.want)
			}
		})
	}
}

func cvNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func cvPod(ns, name, ip, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: name + "-sa"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func TestLocality(t *testing.T) {
	fullNode := cvNode("n1", map[string]string{cvLabelRegion: "us-east1", cvLabelZone: "us-east1-b", cvLabelSubzone: "rack4"})
	regionOnlyNode := cvNode("n2", map[string]string{cvLabelRegion: "eu-west1"})
	bareNode := cvNode("n3", map[string]string{"kubernetes.io/hostname": "n3"})
	overridePod := cvPod("ns", "p", "10.0.0.1", "n1", map[string]string{"istio-locality": "r1.z1.s1"})
	twoPartPod := cvPod("ns", "p", "10.0.0.1", "n1", map[string]string{"istio-locality": "r1.z1"})
	slashPod := cvPod("ns", "p", "10.0.0.1", "n1", map[string]string{"istio-locality": "r1/z1/s1"})
	emptyLabelPod := cvPod("ns", "p", "10.0.0.1", "n1", map[string]string{"istio-locality": ""})
	plainPod := cvPod("ns", "p", "10.0.0.1", "n1", map[string]string{"app": "a"})
	labelled := func(labels map[string]string) *corev1.Pod { return cvPod("ns", "p", "10.0.0.1", "n1", labels) }
	betaNode := cvNode("n4", map[string]string{cvLabelBetaRegion: "old-r", cvLabelBetaZone: "old-z", cvLabelSubzone: "rack2"})
	bothNode := cvNode("n5", map[string]string{
		cvLabelRegion: "ga-r", cvLabelZone: "ga-z", cvLabelBetaRegion: "old-r", cvLabelBetaZone: "old-z"})
	mixedNode := cvNode("n6", map[string]string{cvLabelRegion: "ga-r", cvLabelBetaZone: "old-z"})
	emptyGANode := cvNode("n7", map[string]string{cvLabelRegion: "", cvLabelBetaRegion: "old-r"})
	subzoneOnlyNode := cvNode("n8", map[string]string{cvLabelSubzone: "rack9"})
	zone := new("slice-zone")

	tests := []struct {
		desc      string
		pod       *corev1.Pod
		node      *corev1.Node
		sliceZone *string
		want      model.Locality
	}{
		{"pod label wins over node and slice", overridePod, fullNode, zone, model.Locality{Region: "r1", Zone: "z1", Subzone: "s1"}},
		{"pod label without subzone", twoPartPod, fullNode, zone, model.Locality{Region: "r1", Zone: "z1"}},
		{"pod label with slashes", slashPod, nil, nil, model.Locality{Region: "r1", Zone: "z1", Subzone: "s1"}},
		{"empty pod label is ignored", emptyLabelPod, fullNode, zone, model.Locality{Region: "us-east1", Zone: "us-east1-b", Subzone: "rack4"}},
		{"node labels", plainPod, fullNode, zone, model.Locality{Region: "us-east1", Zone: "us-east1-b", Subzone: "rack4"}},
		{"node labels without pod", nil, fullNode, zone, model.Locality{Region: "us-east1", Zone: "us-east1-b", Subzone: "rack4"}},
		{"partial node labels win over slice zone", plainPod, regionOnlyNode, zone, model.Locality{Region: "eu-west1"}},
		{"node without topology labels falls back to slice zone", plainPod, bareNode, zone, model.Locality{Zone: "slice-zone"}},
		{"no node: slice zone", plainPod, nil, zone, model.Locality{Zone: "slice-zone"}},
		{"nothing known", nil, nil, nil, model.Locality{}},
		{"pod without label, no node, no zone", plainPod, nil, nil, model.Locality{}},

		// Pod labels as Istio's GetLocalityLabel reads them.
		{"topology.istio.io/locality", labelled(map[string]string{cvLabelLocality: "r2.z2.s2"}), fullNode, zone,
			model.Locality{Region: "r2", Zone: "z2", Subzone: "s2"}},
		{"topology.istio.io/locality wins over istio-locality",
			labelled(map[string]string{cvLabelLocality: "r2.z2", cvLabelLegacyLocality: "r1.z1.s1"}), fullNode, zone,
			model.Locality{Region: "r2", Zone: "z2"}},
		// Istio takes the newer label whenever it is present, empty or
		// not, and an empty value means "ask the node".
		{"empty topology.istio.io/locality hides istio-locality",
			labelled(map[string]string{cvLabelLocality: "", cvLabelLegacyLocality: "r1.z1.s1"}), fullNode, zone,
			model.Locality{Region: "us-east1", Zone: "us-east1-b", Subzone: "rack4"}},
		{"parts past the subzone are ignored", labelled(map[string]string{cvLabelLocality: "r1.z1.s1.extra"}), nil, nil,
			model.Locality{Region: "r1", Zone: "z1", Subzone: "s1"}},
		{"slash form past the subzone", labelled(map[string]string{cvLabelLegacyLocality: "r1/z1/s1/extra"}), nil, nil,
			model.Locality{Region: "r1", Zone: "z1", Subzone: "s1"}},

		// Node labels: GA first, deprecated beta labels as fallback, each
		// label on its own.
		{"deprecated node labels", plainPod, betaNode, zone, model.Locality{Region: "old-r", Zone: "old-z", Subzone: "rack2"}},
		{"GA node labels win over deprecated ones", plainPod, bothNode, zone, model.Locality{Region: "ga-r", Zone: "ga-z"}},
		{"GA region, deprecated zone", plainPod, mixedNode, zone, model.Locality{Region: "ga-r", Zone: "old-z"}},
		{"empty GA label falls back", plainPod, emptyGANode, zone, model.Locality{Region: "old-r"}},
		{"subzone alone is a node locality", plainPod, subzoneOnlyNode, zone, model.Locality{Subzone: "rack9"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := kubeconv.Locality(kubeconv.NewPodInfo(tt.pod), tt.node, tt.sliceZone); got != tt.want {
				t.Errorf("Locality = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConvertService(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "reviews", Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}
	tests := []struct {
		desc string
		svc  *corev1.Service
		want *model.Service
	}{
		{
			desc: "cluster IP, dual-stack, every kind of target port",
			svc: &corev1.Service{
				ObjectMeta: meta,
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeClusterIP,
					ClusterIP:  "10.96.0.10",
					ClusterIPs: []string{"10.96.0.10", "fd00::10"},
					Ports: []corev1.ServicePort{
						{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
						{Name: "grpc-api", Port: 9090, TargetPort: intstr.FromString("grpc")},
						{Name: "metrics", Port: 9100},
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("5353")},
					},
				},
			},
			want: &model.Service{
				Hostname: "reviews.bookinfo.svc.cluster.local", Name: "reviews", Namespace: "bookinfo",
				Resolution: model.ClientSideLB,
				ClusterIPs: []string{"10.96.0.10", "fd00::10"},
				Labels:     map[string]string{"app": "reviews"},
				Ports: []model.Port{
					{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.HTTP},
					{Name: "grpc-api", Port: 9090, TargetPortName: "grpc", Protocol: model.GRPC},
					{Name: "metrics", Port: 9100, TargetPort: 9100, Protocol: model.Unsupported},
					{Name: "dns", Port: 53, TargetPort: 5353, Protocol: model.UDP},
				},
			},
		},
		{
			desc: "clusterIP without clusterIPs",
			svc: &corev1.Service{
				ObjectMeta: meta,
				Spec: corev1.ServiceSpec{
					ClusterIP: "10.96.0.11",
					Ports:     []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
				},
			},
			want: &model.Service{
				Hostname: "reviews.bookinfo.svc.cluster.local", Name: "reviews", Namespace: "bookinfo",
				Resolution: model.ClientSideLB,
				ClusterIPs: []string{"10.96.0.11"},
				Labels:     map[string]string{"app": "reviews"},
				Ports:      []model.Port{{Port: 80, TargetPort: 80, Protocol: model.Unsupported}},
			},
		},
		{
			desc: "load balancer is balanced by the client too",
			svc: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: "ns"},
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeLoadBalancer,
					ClusterIPs: []string{"10.96.0.12"},
					Ports:      []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443}},
				},
			},
			want: &model.Service{
				Hostname: "lb.ns.svc.cluster.local", Name: "lb", Namespace: "ns",
				Resolution: model.ClientSideLB,
				ClusterIPs: []string{"10.96.0.12"},
				Ports:      []model.Port{{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.HTTPS}},
			},
		},
		{
			desc: "headless",
			svc: &corev1.Service{
				ObjectMeta: meta,
				Spec: corev1.ServiceSpec{
					ClusterIP:  corev1.ClusterIPNone,
					ClusterIPs: []string{corev1.ClusterIPNone},
					Ports:      []corev1.ServicePort{{Name: "tcp", Port: 5432, TargetPort: intstr.FromInt32(5432)}},
				},
			},
			want: &model.Service{
				Hostname: "reviews.bookinfo.svc.cluster.local", Name: "reviews", Namespace: "bookinfo",
				Resolution: model.Passthrough,
				Labels:     map[string]string{"app": "reviews"},
				Ports:      []model.Port{{Name: "tcp", Port: 5432, TargetPort: 5432, Protocol: model.TCP}},
			},
		},
		{
			desc: "headless given by clusterIPs only",
			svc: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns"},
				Spec:       corev1.ServiceSpec{ClusterIPs: []string{corev1.ClusterIPNone}},
			},
			want: &model.Service{
				Hostname: "h.ns.svc.cluster.local", Name: "h", Namespace: "ns", Resolution: model.Passthrough,
			},
		},
		{
			desc: "ExternalName",
			svc: &corev1.Service{
				ObjectMeta: meta,
				Spec: corev1.ServiceSpec{
					Type:         corev1.ServiceTypeExternalName,
					ExternalName: "reviews.example.com",
					ClusterIP:    "10.96.0.13", // a manifest may carry one; an alias has none
					Ports:        []corev1.ServicePort{{Name: "https", Port: 443}},
				},
			},
			want: &model.Service{
				Hostname: "reviews.bookinfo.svc.cluster.local", Name: "reviews", Namespace: "bookinfo",
				Resolution:   model.DNSAlias,
				ExternalName: "reviews.example.com",
				Labels:       map[string]string{"app": "reviews"},
				Ports:        []model.Port{{Name: "https", Port: 443, TargetPort: 443, Protocol: model.HTTPS}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := cvConvertService(t, tt.svc, "cluster.local")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ConvertService =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestConvertServiceTrafficPolicies: spec.internalTrafficPolicy and
// spec.trafficDistribution reach the model with Kubernetes' meanings:
// unset is Cluster and no preference, PreferClose is PreferSameZone's
// former name, and a value this version does not know is no preference.
func TestConvertServiceTrafficPolicies(t *testing.T) {
	local, cluster, odd := corev1.ServiceInternalTrafficPolicyLocal, corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicy("Nearby")
	tests := []struct {
		desc       string
		spec       corev1.ServiceSpec
		wantPolicy model.InternalTrafficPolicy
		wantDist   model.TrafficDistribution
	}{
		{"unset", corev1.ServiceSpec{}, model.InternalTrafficCluster, model.TrafficDistributionAny},
		{"Cluster", corev1.ServiceSpec{InternalTrafficPolicy: &cluster}, model.InternalTrafficCluster, model.TrafficDistributionAny},
		{"Local", corev1.ServiceSpec{InternalTrafficPolicy: &local}, model.InternalTrafficLocal, model.TrafficDistributionAny},
		{"unknown policy", corev1.ServiceSpec{InternalTrafficPolicy: &odd}, model.InternalTrafficCluster, model.TrafficDistributionAny},
		{"PreferSameZone", corev1.ServiceSpec{TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameZone)}, model.InternalTrafficCluster, model.PreferSameZone},
		{"PreferClose is PreferSameZone", corev1.ServiceSpec{TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferClose)}, model.InternalTrafficCluster, model.PreferSameZone},
		{"PreferSameNode", corev1.ServiceSpec{TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameNode)}, model.InternalTrafficCluster, model.PreferSameNode},
		{"unknown distribution", corev1.ServiceSpec{TrafficDistribution: new("PreferSameRack")}, model.InternalTrafficCluster, model.TrafficDistributionAny},
		{"values are case-sensitive", corev1.ServiceSpec{TrafficDistribution: new("prefersamezone")}, model.InternalTrafficCluster, model.TrafficDistributionAny},
		{"both", corev1.ServiceSpec{InternalTrafficPolicy: &local, TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameNode)},
			model.InternalTrafficLocal, model.PreferSameNode},
		{"headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, InternalTrafficPolicy: &local, TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameZone)},
			model.InternalTrafficLocal, model.PreferSameZone},
		{"ExternalName", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "a.example.com",
			InternalTrafficPolicy: &local, TrafficDistribution: new(corev1.ServiceTrafficDistributionPreferSameZone)},
			model.InternalTrafficLocal, model.PreferSameZone},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: tt.spec}
			svc.Spec.Ports = []corev1.ServicePort{{Name: "grpc", Port: 80}}
			got := cvConvertService(t, svc, "cluster.local")
			if got.InternalTrafficPolicy != tt.wantPolicy || got.TrafficDistribution != tt.wantDist {
				t.Errorf("got %v, %q; want %v, %q", got.InternalTrafficPolicy, got.TrafficDistribution, tt.wantPolicy, tt.wantDist)
			}
		})
	}
}

func TestConvertServiceNil(t *testing.T) {
	if got := cvConvertService(t, nil, "cluster.local"); got != nil {
		t.Errorf("ConvertService(nil) = %+v, want nil", got)
	}
	if got := cvConvertService(t, &corev1.Service{}, ""); got == nil {
		t.Error("ConvertService(empty) = nil, want a service")
	}
}

func TestConvertServiceCopies(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.1"}},
	}
	got := cvConvertService(t, svc, "cluster.local")
	svc.Labels["app"] = "changed"
	svc.Spec.ClusterIPs[0] = "10.9.9.9"
	if got.Labels["app"] != "a" || got.ClusterIPs[0] != "10.0.0.1" {
		t.Errorf("model service shares memory with the Kubernetes object: %+v", got)
	}
}

// cvFixture is a small cluster: nodes, pods, and lookups over them.
type cvFixture struct {
	pods        map[string]*corev1.Pod // namespace/name
	nodes       map[string]*corev1.Node
	nodeLookups int
}

func newCVFixture() *cvFixture {
	return &cvFixture{pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}
}

func (f *cvFixture) addPod(p *corev1.Pod) *corev1.Pod {
	f.pods[p.Namespace+"/"+p.Name] = p
	return p
}

func (f *cvFixture) addNode(n *corev1.Node) { f.nodes[n.Name] = n }

func (f *cvFixture) lookup() kubeconv.EndpointLookup {
	return kubeconv.EndpointLookup{
		Pod: func(ns, name string) *kubeconv.PodInfo { return kubeconv.NewPodInfo(f.pods[ns+"/"+name]) },
		PodByIP: func(namespace, ip string) *kubeconv.PodInfo {
			return kubeconv.PodForIP(namespace, func(yield func(*kubeconv.PodInfo) bool) {
				for _, p := range f.pods {
					if info := kubeconv.NewPodInfo(p); slices.Contains(info.IPs, ip) && !yield(info) {
						return
					}
				}
			})
		},
		Node: func(name string) *corev1.Node {
			f.nodeLookups++
			return f.nodes[name]
		},
	}
}

func cvService(ports ...model.Port) *model.Service {
	return &model.Service{
		Hostname: "svc.ns.svc.cluster.local", Name: "svc", Namespace: "ns",
		Resolution: model.ClientSideLB, Ports: ports,
	}
}

func cvSlice(name string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc"},
		},
		AddressType: family,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func cvPort(name *string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: name, Port: &port}
}

func cvPodRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name}
}

func cvEndpoint(ref *corev1.ObjectReference, ready bool, addrs ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addrs, TargetRef: ref, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

// cvBrief is the part of an endpoint most tests look at.
type cvBrief struct {
	Address  string
	Port     uint32
	PortName string
	Health   model.Health
}

func cvBriefs(eps []*model.Endpoint) []cvBrief {
	out := make([]cvBrief, 0, len(eps))
	for _, ep := range eps {
		out = append(out, cvBrief{ep.Address, ep.Port, ep.ServicePortName, ep.Health})
	}
	return out
}

func TestBuildEndpointsFull(t *testing.T) {
	f := newCVFixture()
	f.addNode(cvNode("node-a", map[string]string{cvLabelRegion: "r1", cvLabelZone: "z1", cvLabelSubzone: "s1"}))
	f.addPod(cvPod("ns", "web-1", "10.0.0.1", "node-a", map[string]string{"app": "web", "version": "v1"}))
	svc := cvService(model.Port{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.HTTP})
	slice := cvSlice("svc-abc", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{cvPort(new("http"), 8080)},
		discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			TargetRef:  cvPodRef("web-1"),
			NodeName:   new("node-from-slice"), // the Pod's own nodeName wins
			Zone:       new("slice-zone"),
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
		})

	got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{slice}, f.lookup())
	want := []*model.Endpoint{{
		Address: "10.0.0.1", Port: 8080, ServicePortName: "http",
		Labels: map[string]string{
			"app": "web", "version": "v1",
			cvLabelRegion: "r1", cvLabelZone: "z1", cvLabelSubzone: "s1",
			"kubernetes.io/hostname": "node-a", "topology.istio.io/cluster": "Kubernetes",
		},
		Locality:       model.Locality{Region: "r1", Zone: "z1", Subzone: "s1"},
		Health:         model.Healthy,
		Namespace:      "ns",
		PodName:        "web-1",
		NodeName:       "node-a",
		ServiceAccount: "web-1-sa",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildEndpoints =\n%+v\nwant\n%+v", cvDeref(got), cvDeref(want))
	}
}

// TestBuildEndpointsNodeName: an endpoint's node, which
// internalTrafficPolicy Local and PreferSameNode compare with the client's,
// is its Pod's spec.nodeName (Istio reads the Pod's alone), else the slice
// endpoint's nodeName: a slice may name no Pod, or one not cached yet.
func TestBuildEndpointsNodeName(t *testing.T) {
	f := newCVFixture()
	f.addPod(cvPod("ns", "placed", "10.0.0.1", "node-a", nil))
	f.addPod(cvPod("ns", "unplaced", "10.0.0.2", "", nil))
	tests := []struct {
		desc      string
		ref       *corev1.ObjectReference
		address   string
		sliceNode *string
		want      string
	}{
		{"the Pod's node", cvPodRef("placed"), "10.0.0.1", nil, "node-a"},
		{"the Pod's node over the slice's", cvPodRef("placed"), "10.0.0.1", new("node-b"), "node-a"},
		{"the Pod found by IP", nil, "10.0.0.1", new("node-b"), "node-a"},
		{"a Pod without a node: the slice's", cvPodRef("unplaced"), "10.0.0.2", new("node-b"), "node-b"},
		{"no Pod: the slice's", nil, "10.0.0.9", new("node-b"), "node-b"},
		{"a Pod not cached yet: the slice's", cvPodRef("later"), "10.0.0.9", new("node-b"), "node-b"},
		{"nowhere", nil, "10.0.0.9", nil, ""},
	}
	svc := cvService(model.Port{Name: "grpc", Port: 80, TargetPort: 8080, Protocol: model.GRPC})
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ep := cvEndpoint(tt.ref, true, tt.address)
			ep.NodeName = tt.sliceNode
			slice := cvSlice("svc-abc", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("grpc"), 8080)}, ep)
			got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{slice}, f.lookup())
			if len(got) != 1 || got[0].NodeName != tt.want {
				t.Fatalf("endpoints %+v, want one on node %q", cvDeref(got), tt.want)
			}
		})
	}
}

func cvDeref(eps []*model.Endpoint) []model.Endpoint {
	out := make([]model.Endpoint, 0, len(eps))
	for _, ep := range eps {
		out = append(out, *ep)
	}
	return out
}

func TestBuildEndpointsPorts(t *testing.T) {
	tests := []struct {
		desc       string
		svcPorts   []model.Port
		slicePorts []discoveryv1.EndpointPort
		want       []cvBrief
	}{
		{
			desc: "matched by name, extra slice port ignored",
			svcPorts: []model.Port{
				{Name: "http", Port: 80, TargetPortName: "web"},
				{Name: "grpc", Port: 9090, TargetPort: 9091},
			},
			slicePorts: []discoveryv1.EndpointPort{
				cvPort(new("metrics"), 9100),
				cvPort(new("grpc"), 9091),
				cvPort(new("http"), 8080),
			},
			want: []cvBrief{
				{"10.0.0.1", 9091, "grpc", model.Healthy},
				{"10.0.0.2", 9091, "grpc", model.Healthy},
				{"10.0.0.1", 8080, "http", model.Healthy},
				{"10.0.0.2", 8080, "http", model.Healthy},
			},
		},
		{
			desc:       "unnamed port matches a nil name",
			svcPorts:   []model.Port{{Port: 80, TargetPort: 8080}},
			slicePorts: []discoveryv1.EndpointPort{cvPort(nil, 8080)},
			want: []cvBrief{
				{"10.0.0.1", 8080, "", model.Healthy},
				{"10.0.0.2", 8080, "", model.Healthy},
			},
		},
		{
			desc:       "unnamed port matches an empty name",
			svcPorts:   []model.Port{{Port: 80, TargetPort: 8080}},
			slicePorts: []discoveryv1.EndpointPort{cvPort(new(""), 8080)},
			want: []cvBrief{
				{"10.0.0.1", 8080, "", model.Healthy},
				{"10.0.0.2", 8080, "", model.Healthy},
			},
		},
		{
			desc:       "named slice port does not serve an unnamed service port",
			svcPorts:   []model.Port{{Port: 80, TargetPort: 8080}},
			slicePorts: []discoveryv1.EndpointPort{cvPort(new("http"), 8080)},
			want:       []cvBrief{},
		},
		{
			desc:     "port without a number is skipped",
			svcPorts: []model.Port{{Name: "http", Port: 80}, {Name: "admin", Port: 81, TargetPortName: "admin"}},
			slicePorts: []discoveryv1.EndpointPort{
				{Name: new("admin")},
				cvPort(new("http"), 80),
			},
			want: []cvBrief{
				{"10.0.0.1", 80, "http", model.Healthy},
				{"10.0.0.2", 80, "http", model.Healthy},
			},
		},
		{
			desc:       "slice without ports",
			svcPorts:   []model.Port{{Name: "http", Port: 80}},
			slicePorts: nil,
			want:       []cvBrief{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			slice := cvSlice("s1", discoveryv1.AddressTypeIPv4, tt.slicePorts,
				cvEndpoint(nil, true, "10.0.0.2"),
				cvEndpoint(nil, true, "10.0.0.1"))
			got := cvBriefs(cvBuildEndpoints(t, cvService(tt.svcPorts...), []*discoveryv1.EndpointSlice{slice}, kubeconv.EndpointLookup{}))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestBuildEndpointsAddressTypes(t *testing.T) {
	f := newCVFixture()
	pod := cvPod("ns", "p1", "10.0.0.1", "", map[string]string{"app": "a"})
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	f.addPod(pod)
	ports := []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}
	v4 := cvSlice("s-v4", discoveryv1.AddressTypeIPv4, ports, cvEndpoint(cvPodRef("p1"), true, "10.0.0.1"))
	v6 := cvSlice("s-v6", discoveryv1.AddressTypeIPv6, ports, cvEndpoint(cvPodRef("p1"), true, "fd00::1"))
	fqdn := cvSlice("s-fqdn", discoveryv1.AddressTypeFQDN, ports, cvEndpoint(nil, true, "db.example.com"))
	svc := cvService(model.Port{Name: "http", Port: 80})

	got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{fqdn, v6, v4}, f.lookup())
	want := []cvBrief{
		{"10.0.0.1", 8080, "http", model.Healthy},
		{"fd00::1", 8080, "http", model.Healthy},
	}
	if b := cvBriefs(got); !reflect.DeepEqual(b, want) {
		t.Fatalf("got  %+v\nwant %+v", b, want)
	}
	for _, ep := range got {
		if ep.PodName != "p1" || ep.Labels["app"] != "a" {
			t.Errorf("endpoint %s lost its pod: %+v", ep.Address, *ep)
		}
	}

	if got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{fqdn}, f.lookup()); len(got) != 0 {
		t.Errorf("FQDN slice produced endpoints: %+v", cvDeref(got))
	}
}

func TestBuildEndpointsMerge(t *testing.T) {
	ports := []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}
	svc := cvService(model.Port{Name: "http", Port: 80})
	cond := func(ready, serving, terminating bool) discoveryv1.EndpointConditions {
		return discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}
	}
	healthy := cond(true, true, false)
	draining := cond(false, true, true)
	unhealthy := cond(false, false, false)
	ep := func(addr string, c discoveryv1.EndpointConditions, zone string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: c, Zone: &zone}
	}

	tests := []struct {
		desc   string
		slices []*discoveryv1.EndpointSlice
		want   []cvBrief
		// wantZone is the zone of the kept copy of 10.0.0.1, which tells
		// which slice it came from.
		wantZone string
	}{
		{
			desc: "healthy beats unhealthy",
			slices: []*discoveryv1.EndpointSlice{
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", unhealthy, "za"), ep("10.0.0.2", healthy, "za")),
				cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "zb")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}, {"10.0.0.2", 8080, "http", model.Healthy}},
			wantZone: "zb",
		},
		{
			desc: "draining beats unhealthy",
			slices: []*discoveryv1.EndpointSlice{
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", draining, "za")),
				cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", unhealthy, "zb")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Draining}},
			wantZone: "za",
		},
		{
			desc: "healthy beats draining",
			slices: []*discoveryv1.EndpointSlice{
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", draining, "za")),
				cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "zb")),
				cvSlice("c", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", unhealthy, "zc")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "zb",
		},
		{
			desc: "equal health: first slice by name",
			slices: []*discoveryv1.EndpointSlice{
				cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "zb")),
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "za")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "za",
		},
		{
			// A stale slice from before a targetPort change: one endpoint
			// per (address, service port name), as in Istio.
			desc: "same address and port name on another target port is a duplicate",
			slices: []*discoveryv1.EndpointSlice{
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "za")),
				cvSlice("b", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("http"), 9090)}, ep("10.0.0.1", unhealthy, "zb")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "za",
		},
		{
			desc: "equal health: the newest slice",
			slices: []*discoveryv1.EndpointSlice{
				cvCreated(cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "za")), 1),
				cvCreated(cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "zb")), 2),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "zb",
		},
		{
			desc: "health beats age",
			slices: []*discoveryv1.EndpointSlice{
				cvCreated(cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "za")), 1),
				cvCreated(cvSlice("b", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", draining, "zb")), 2),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "za",
		},
		{
			desc: "nil slices are skipped",
			slices: []*discoveryv1.EndpointSlice{
				nil,
				cvSlice("a", discoveryv1.AddressTypeIPv4, ports, ep("10.0.0.1", healthy, "za")),
			},
			want:     []cvBrief{{"10.0.0.1", 8080, "http", model.Healthy}},
			wantZone: "za",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			forward := cvBuildEndpoints(t, svc, tt.slices, kubeconv.EndpointLookup{})
			reversed := slices.Clone(tt.slices)
			slices.Reverse(reversed)
			backward := cvBuildEndpoints(t, svc, reversed, kubeconv.EndpointLookup{})

			if got := cvBriefs(forward); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if !slices.EqualFunc(forward, backward, (*model.Endpoint).Equal) {
				t.Errorf("result depends on slice order:\n%+v\n%+v", cvDeref(forward), cvDeref(backward))
			}
			if forward[0].Locality.Zone != tt.wantZone {
				t.Errorf("kept copy from zone %q, want %q", forward[0].Locality.Zone, tt.wantZone)
			}
		})
	}
}

// cvCreated sets a slice's creation time, seconds after an arbitrary
// epoch.
func cvCreated(s *discoveryv1.EndpointSlice, sec int64) *discoveryv1.EndpointSlice {
	s.CreationTimestamp = metav1.Unix(1_700_000_000+sec, 0)
	return s
}

// TestBuildEndpointsStaleTargetPort: after a Service's targetPort changes
// from 8080 to 9090, the slice controller writes new slices and deletes
// the old ones; until then an address is listed on both ports. It must
// stay one endpoint, on the port the Service names, whatever the slices'
// health, age or names.
func TestBuildEndpointsStaleTargetPort(t *testing.T) {
	svc := cvService(model.Port{Name: "http", Port: 80, TargetPort: 9090})
	oldPorts := []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}
	newPorts := []discoveryv1.EndpointPort{cvPort(new("http"), 9090)}
	for _, tc := range []struct {
		desc         string
		oldName      string
		oldCreated   int64
		oldReady     bool
		newName      string
		newCreated   int64
		newReady     bool
		wantHealth   model.Health
		wantEndpoint string
	}{
		{"both ready", "web-old", 1, true, "web-new", 2, true, model.Healthy, "10.0.0.1:9090"},
		{"stale slice sorts first by name", "a-old", 1, true, "z-new", 2, true, model.Healthy, "10.0.0.1:9090"},
		{"stale slice is newer", "web-old", 2, true, "web-new", 1, true, model.Healthy, "10.0.0.1:9090"},
		{"stale slice is healthier", "web-old", 1, true, "web-new", 2, false, model.Unhealthy, "10.0.0.1:9090"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := []*discoveryv1.EndpointSlice{
				cvCreated(cvSlice(tc.oldName, discoveryv1.AddressTypeIPv4, oldPorts, cvEndpoint(nil, tc.oldReady, "10.0.0.1")), tc.oldCreated),
				cvCreated(cvSlice(tc.newName, discoveryv1.AddressTypeIPv4, newPorts, cvEndpoint(nil, tc.newReady, "10.0.0.1")), tc.newCreated),
			}
			for range 2 {
				got := cvBuildEndpoints(t, svc, in, kubeconv.EndpointLookup{})
				if len(got) != 1 || fmt.Sprintf("%s:%d", got[0].Address, got[0].Port) != tc.wantEndpoint || got[0].Health != tc.wantHealth {
					t.Fatalf("got %+v, want one endpoint %s %v", cvBriefs(got), tc.wantEndpoint, tc.wantHealth)
				}
				slices.Reverse(in)
			}
		})
	}
}

func TestBuildEndpointsPodLookup(t *testing.T) {
	ports := []discoveryv1.EndpointPort{cvPort(new("http"), 8080)}
	svc := cvService(model.Port{Name: "http", Port: 80})

	f := newCVFixture()
	f.addNode(cvNode("node-a", map[string]string{cvLabelRegion: "r1", cvLabelZone: "z1"}))
	f.addNode(cvNode("node-b", map[string]string{cvLabelRegion: "r2", cvLabelZone: "z2"}))
	f.addPod(cvPod("ns", "known", "10.0.0.1", "node-a", map[string]string{"app": "known"}))
	f.addPod(cvPod("ns", "by-ip", "10.0.0.2", "node-a", map[string]string{"app": "by-ip"}))
	f.addPod(cvPod("ns", "newcomer", "10.0.0.3", "node-a", map[string]string{"app": "newcomer"}))
	f.addPod(cvPod("ns", "pinned", "10.0.0.4", "node-a", map[string]string{"app": "pinned", "istio-locality": "r9.z9.s9"}))
	f.addPod(cvPod("ns", "hostnet", "10.0.0.5", "node-a", map[string]string{"app": "hostnet"}))
	// 10.0.0.6 is a node's IP, shared by hostNetwork Pods: one of another
	// namespace (first by name), a finished one and a deleting one of the
	// slice's namespace, and the live one the endpoint belongs to.
	f.addPod(cvPod("aaa", "agent", "10.0.0.6", "node-a", map[string]string{"app": "agent"}))
	finished := f.addPod(cvPod("ns", "a-job", "10.0.0.6", "node-a", map[string]string{"app": "job"}))
	finished.Status.Phase = corev1.PodSucceeded
	deleting := f.addPod(cvPod("ns", "b-old", "10.0.0.6", "node-a", map[string]string{"app": "old"}))
	deleting.DeletionTimestamp = &metav1.Time{}
	f.addPod(cvPod("ns", "c-new", "10.0.0.6", "node-a", map[string]string{"app": "new"}))
	// 10.0.0.7 is held only by a Pod of another namespace.
	f.addPod(cvPod("other", "elsewhere", "10.0.0.7", "node-b", map[string]string{"app": "elsewhere"}))

	tests := []struct {
		desc   string
		lookup kubeconv.EndpointLookup
		ep     discoveryv1.Endpoint
		want   model.Endpoint
	}{
		{
			desc:   "pod through targetRef",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: cvPodRef("known")},
			want: model.Endpoint{
				Labels:   map[string]string{"app": "known", cvLabelRegion: "r1", cvLabelZone: "z1"},
				Locality: model.Locality{Region: "r1", Zone: "z1"},
				PodName:  "known", NodeName: "node-a", ServiceAccount: "known-sa",
			},
		},
		{
			desc:   "targetRef without namespace means the slice's",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "known"}},
			want: model.Endpoint{
				Labels:   map[string]string{"app": "known", cvLabelRegion: "r1", cvLabelZone: "z1"},
				Locality: model.Locality{Region: "r1", Zone: "z1"},
				PodName:  "known", NodeName: "node-a", ServiceAccount: "known-sa",
			},
		},
		{
			desc:   "pod by IP without targetRef",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}},
			want: model.Endpoint{
				Labels:   map[string]string{"app": "by-ip", cvLabelRegion: "r1", cvLabelZone: "z1"},
				Locality: model.Locality{Region: "r1", Zone: "z1"},
				PodName:  "by-ip", NodeName: "node-a", ServiceAccount: "by-ip-sa",
			},
		},
		{
			desc:   "shared IP without targetRef: the live pod of the slice's namespace",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.6"}},
			want: model.Endpoint{
				Labels:   map[string]string{"app": "new", cvLabelRegion: "r1", cvLabelZone: "z1"},
				Locality: model.Locality{Region: "r1", Zone: "z1"},
				PodName:  "c-new", NodeName: "node-a", ServiceAccount: "c-new-sa",
			},
		},
		{
			desc:   "IP held only by a pod of another namespace",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.7"}, Zone: new("z-slice")},
			want: model.Endpoint{
				Labels:   map[string]string{cvLabelZone: "z-slice"},
				Locality: model.Locality{Zone: "z-slice"},
			},
		},
		{
			desc:   "pod by IP when only PodByIP is given and it is the referenced pod",
			lookup: kubeconv.EndpointLookup{PodByIP: f.lookup().PodByIP},
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: cvPodRef("known"), Zone: new("z-slice")},
			want: model.Endpoint{
				Labels:   map[string]string{"app": "known", cvLabelZone: "z-slice"},
				Locality: model.Locality{Zone: "z-slice"},
				PodName:  "known", NodeName: "node-a", ServiceAccount: "known-sa",
			},
		},
		{
			desc:   "IP now held by another pod is not attributed to it",
			lookup: f.lookup(),
			ep: discoveryv1.Endpoint{
				Addresses: []string{"10.0.0.3"}, TargetRef: cvPodRef("gone"),
				NodeName: new("node-b"), Zone: new("z2"),
			},
			want: model.Endpoint{
				Labels:   map[string]string{cvLabelRegion: "r2", cvLabelZone: "z2"},
				Locality: model.Locality{Region: "r2", Zone: "z2"},
				PodName:  "gone", NodeName: "node-b",
			},
		},
		{
			desc:   "pod missing: slice zone locality",
			lookup: f.lookup(),
			ep: discoveryv1.Endpoint{
				Addresses: []string{"10.0.0.9"}, TargetRef: cvPodRef("not-yet"),
				NodeName: new("unknown-node"), Zone: new("z7"),
			},
			want: model.Endpoint{
				Labels:   map[string]string{cvLabelZone: "z7"},
				Locality: model.Locality{Zone: "z7"},
				PodName:  "not-yet", NodeName: "unknown-node",
			},
		},
		{
			desc:   "pod missing, node known through the slice",
			lookup: f.lookup(),
			ep: discoveryv1.Endpoint{
				Addresses: []string{"10.0.0.9"}, TargetRef: cvPodRef("not-yet"),
				NodeName: new("node-b"), Zone: new("z-other"),
			},
			want: model.Endpoint{
				Labels:   map[string]string{cvLabelRegion: "r2", cvLabelZone: "z2"},
				Locality: model.Locality{Region: "r2", Zone: "z2"},
				PodName:  "not-yet", NodeName: "node-b",
			},
		},
		{
			desc:   "pod label overrides node locality",
			lookup: f.lookup(),
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.4"}, TargetRef: cvPodRef("pinned")},
			want: model.Endpoint{
				Labels: map[string]string{
					"app": "pinned", "istio-locality": "r9.z9.s9",
					cvLabelRegion: "r9", cvLabelZone: "z9", cvLabelSubzone: "s9",
				},
				Locality: model.Locality{Region: "r9", Zone: "z9", Subzone: "s9"},
				PodName:  "pinned", NodeName: "node-a", ServiceAccount: "pinned-sa",
			},
		},
		{
			desc:   "targetRef to something other than a Pod",
			lookup: f.lookup(),
			ep: discoveryv1.Endpoint{
				Addresses: []string{"10.0.0.5"},
				TargetRef: &corev1.ObjectReference{Kind: "Node", Name: "node-a"},
			},
			want: model.Endpoint{},
		},
		{
			desc:   "a remote cluster's endpoint carries its cluster ID",
			lookup: kubeconv.EndpointLookup{ClusterID: "cluster-b"},
			ep:     discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}},
			want:   model.Endpoint{ClusterID: "cluster-b"},
		},
		{
			desc:   "no lookups at all",
			lookup: kubeconv.EndpointLookup{},
			ep: discoveryv1.Endpoint{
				Addresses: []string{"10.0.0.1"}, TargetRef: cvPodRef("known"),
				NodeName: new("node-a"), Zone: new("z1"),
			},
			want: model.Endpoint{
				Labels:   map[string]string{cvLabelZone: "z1"},
				Locality: model.Locality{Zone: "z1"},
				PodName:  "known", NodeName: "node-a",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			slice := cvSlice("s", discoveryv1.AddressTypeIPv4, ports, tt.ep)
			got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{slice}, tt.lookup)
			if len(got) != 1 {
				t.Fatalf("got %d endpoints, want 1", len(got))
			}
			want := tt.want
			want.Address = tt.ep.Addresses[0]
			want.Port = 8080
			want.ServicePortName = "http"
			want.Namespace = "ns"
			want.Health = model.Healthy
			// Istio's topology labels (AugmentLabels): the cluster's on
			// every endpoint, the Node's where it is known.
			want.Labels = maps.Clone(want.Labels)
			if want.Labels == nil {
				want.Labels = map[string]string{}
			}
			want.Labels["topology.istio.io/cluster"] = cmp.Or(tt.lookup.ClusterID, model.DefaultClusterID)
			if want.NodeName != "" {
				want.Labels["kubernetes.io/hostname"] = want.NodeName
			}
			if !got[0].Equal(&want) {
				t.Errorf("got  %+v\nwant %+v", *got[0], want)
			}
		})
	}
}

func TestBuildEndpointsSkipsNodeLookupForPinnedPods(t *testing.T) {
	for _, label := range []string{cvLabelLocality, cvLabelLegacyLocality} {
		f := newCVFixture()
		f.addNode(cvNode("node-a", map[string]string{cvLabelZone: "z1"}))
		f.addPod(cvPod("ns", "pinned", "10.0.0.4", "node-a", map[string]string{label: "r9.z9"}))
		slice := cvSlice("s", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("http"), 8080)},
			cvEndpoint(cvPodRef("pinned"), true, "10.0.0.4"))
		got := cvBuildEndpoints(t, cvService(model.Port{Name: "http", Port: 80}), []*discoveryv1.EndpointSlice{slice}, f.lookup())
		if f.nodeLookups != 0 {
			t.Errorf("%s: looked up the node %d times for a pod whose label decides", label, f.nodeLookups)
		}
		if len(got) != 1 || got[0].Locality != (model.Locality{Region: "r9", Zone: "z9"}) {
			t.Errorf("%s: endpoints %+v", label, cvDeref(got))
		}
	}
}

func TestBuildEndpointsSharesLabelsAcrossPorts(t *testing.T) {
	f := newCVFixture()
	f.addPod(cvPod("ns", "p", "10.0.0.1", "", map[string]string{"app": "a"}))
	slice := cvSlice("s", discoveryv1.AddressTypeIPv4,
		[]discoveryv1.EndpointPort{cvPort(new("http"), 8080), cvPort(new("grpc"), 9090)},
		cvEndpoint(cvPodRef("p"), true, "10.0.0.1"))
	svc := cvService(model.Port{Name: "http", Port: 80}, model.Port{Name: "grpc", Port: 90})
	got := cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{slice}, f.lookup())
	if len(got) != 2 {
		t.Fatalf("got %d endpoints, want 2", len(got))
	}
	if reflect.ValueOf(got[0].Labels).UnsafePointer() != reflect.ValueOf(got[1].Labels).UnsafePointer() {
		t.Error("each port of one address got its own labels map")
	}
	// The Pod's map must not be handed out: the informer owns it.
	if reflect.ValueOf(got[0].Labels).UnsafePointer() == reflect.ValueOf(f.pods["ns/p"].Labels).UnsafePointer() {
		t.Error("endpoint labels alias the Pod's labels")
	}
}

func TestBuildEndpointsOrderAndHealth(t *testing.T) {
	ports := []discoveryv1.EndpointPort{cvPort(new("b-port"), 2000), cvPort(new("a-port"), 1000)}
	svc := cvService(model.Port{Name: "a-port", Port: 1}, model.Port{Name: "b-port", Port: 2})
	slice := cvSlice("s", discoveryv1.AddressTypeIPv4, ports,
		cvEndpoint(nil, true, "10.0.0.3"),
		cvEndpoint(nil, false, "10.0.0.1"),
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{
			Ready: new(false), Serving: new(true), Terminating: new(true),
		}},
	)
	got := cvBriefs(cvBuildEndpoints(t, svc, []*discoveryv1.EndpointSlice{slice}, kubeconv.EndpointLookup{}))
	want := []cvBrief{
		{"10.0.0.1", 1000, "a-port", model.Unhealthy},
		{"10.0.0.2", 1000, "a-port", model.Draining},
		{"10.0.0.3", 1000, "a-port", model.Healthy},
		{"10.0.0.1", 2000, "b-port", model.Unhealthy},
		{"10.0.0.2", 2000, "b-port", model.Draining},
		{"10.0.0.3", 2000, "b-port", model.Healthy},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestBuildEndpointsNoEndpoints(t *testing.T) {
	slice := cvSlice("s", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{cvPort(new("http"), 8080)},
		cvEndpoint(nil, true, "10.0.0.1"))
	slicesIn := []*discoveryv1.EndpointSlice{slice}

	alias := cvService(model.Port{Name: "http", Port: 80})
	alias.Resolution = model.DNSAlias
	alias.ExternalName = "example.com"
	headless := cvService(model.Port{Name: "http", Port: 80})
	headless.Resolution = model.Passthrough

	if got := cvBuildEndpoints(t, nil, slicesIn, kubeconv.EndpointLookup{}); got != nil {
		t.Errorf("nil service: %+v", cvDeref(got))
	}
	if got := cvBuildEndpoints(t, alias, slicesIn, kubeconv.EndpointLookup{}); got != nil {
		t.Errorf("ExternalName service: %+v", cvDeref(got))
	}
	if got := cvBuildEndpoints(t, cvService(), slicesIn, kubeconv.EndpointLookup{}); got != nil {
		t.Errorf("service without ports: %+v", cvDeref(got))
	}
	if got := cvBuildEndpoints(t, headless, slicesIn, kubeconv.EndpointLookup{}); len(got) != 1 {
		t.Errorf("headless service got %d endpoints, want 1", len(got))
	}
	if got := cvBuildEndpoints(t, headless, nil, kubeconv.EndpointLookup{}); len(got) != 0 {
		t.Errorf("no slices: %+v", cvDeref(got))
	}
}

func TestConvertWorkload(t *testing.T) {
	node := cvNode("node-a", map[string]string{cvLabelRegion: "r1", cvLabelZone: "z1"})
	dual := cvPod("ns", "p", "10.0.0.1", "node-a", map[string]string{"app": "a"})
	dual.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	legacy := cvPod("ns", "old", "10.0.0.2", "", nil)
	legacy.Status.PodIPs = nil
	pending := cvPod("ns", "pending", "", "", nil)
	pending.Status.PodIPs = nil

	tests := []struct {
		desc string
		pod  *corev1.Pod
		node *corev1.Node
		want *model.Workload
	}{
		{"nil pod", nil, node, nil},
		{
			"dual-stack pod with node", dual, node,
			&model.Workload{
				Name: "p", Namespace: "ns", Addresses: []string{"10.0.0.1", "fd00::1"},
				Labels: map[string]string{"app": "a"}, Locality: model.Locality{Region: "r1", Zone: "z1"},
				NodeName: "node-a", ServiceAccount: "p-sa",
			},
		},
		{
			"podIP only, no node", legacy, nil,
			&model.Workload{Name: "old", Namespace: "ns", Addresses: []string{"10.0.0.2"}, ServiceAccount: "old-sa"},
		},
		{
			"no IP yet", pending, nil,
			&model.Workload{Name: "pending", Namespace: "ns", ServiceAccount: "pending-sa"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := kubeconv.ConvertWorkload(kubeconv.NewPodInfo(tt.pod), tt.node)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}

	w := kubeconv.ConvertWorkload(kubeconv.NewPodInfo(dual), node)
	dual.Labels["app"] = "changed"
	if w.Labels["app"] != "a" {
		t.Error("workload labels alias the Pod's labels")
	}
}

func BenchmarkConvertService(b *testing.B) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "reviews", Namespace: "bookinfo",
			Labels: map[string]string{"app": "reviews", "service": "reviews", "team": "books"},
		},
		Spec: corev1.ServiceSpec{
			ClusterIPs: []string{"10.96.0.10", "fd00::10"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "grpc-web", Port: 8081, TargetPort: intstr.FromString("grpcweb")},
				{Name: "metrics", Port: 9100},
				{Name: "h2c", Port: 9090, AppProtocol: new("kubernetes.io/h2c")},
			},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if kubeconv.ConvertService(svc, "cluster.local") == nil {
			b.Fatal("nil")
		}
	}
}

// BenchmarkBuildEndpoints: one service with two ports, 3 slices of 100
// endpoints each, every endpoint backed by a Pod on one of 10 Nodes. The
// lookups do not allocate, so the figures are BuildEndpoints' own.
func BenchmarkBuildEndpoints(b *testing.B) {
	type podKey struct{ ns, name string }
	pods := map[podKey]*kubeconv.PodInfo{}
	nodes := map[string]*corev1.Node{}
	for i := range 10 {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = cvNode(name, map[string]string{cvLabelRegion: "r1", cvLabelZone: fmt.Sprintf("z%d", i%3)})
	}
	ports := []discoveryv1.EndpointPort{cvPort(new("http"), 8080), cvPort(new("grpc"), 9090)}
	var in []*discoveryv1.EndpointSlice
	for s := range 3 {
		var eps []discoveryv1.Endpoint
		for i := range 100 {
			name := fmt.Sprintf("web-%d-%d", s, i)
			ip := fmt.Sprintf("10.%d.%d.%d", s, i/250, i%250+1)
			node := fmt.Sprintf("node-%d", i%10)
			pods[podKey{"ns", name}] = kubeconv.NewPodInfo(cvPod("ns", name, ip, node, map[string]string{
				"app": "web", "version": "v1", "pod-template-hash": "abc123",
			}))
			eps = append(eps, discoveryv1.Endpoint{
				Addresses:  []string{ip},
				TargetRef:  cvPodRef(name),
				NodeName:   &node,
				Conditions: discoveryv1.EndpointConditions{Ready: new(i%7 != 0)},
			})
		}
		in = append(in, cvSlice(fmt.Sprintf("svc-%d", s), discoveryv1.AddressTypeIPv4, ports, eps...))
	}
	svc := cvService(model.Port{Name: "http", Port: 80}, model.Port{Name: "grpc", Port: 90})
	lookup := kubeconv.EndpointLookup{
		Pod:  func(ns, name string) *kubeconv.PodInfo { return pods[podKey{ns, name}] },
		Node: func(name string) *corev1.Node { return nodes[name] },
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := kubeconv.BuildEndpoints(svc, in, lookup); len(got) != 600 {
			b.Fatalf("got %d endpoints, want 600", len(got))
		}
	}
}
