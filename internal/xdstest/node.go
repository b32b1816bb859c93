package xdstest

import (
	"fmt"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// NodeOptions describes the node a client presents.
type NodeOptions struct {
	// ID is the node id, for example SidecarID's.
	ID string
	// Namespace, when set, goes in metadata NAMESPACE, where Istio's
	// bootstraps put it.
	Namespace string
	// Locality is the node's locality; none when nil.
	Locality *core.Locality
	// Metadata holds more metadata fields.
	Metadata map[string]string
}

// gRPCClientFeatures are the client features grpc-go announces.
var gRPCClientFeatures = []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"}

// GRPCNode is the node of a proxyless grpc-go client with an Istio-style
// bootstrap: metadata GENERATOR=grpc, grpc-go's user agent, version and
// client features.
func GRPCNode(o NodeOptions) *core.Node {
	n := node(o, "grpc")
	n.UserAgentName = "gRPC Go"
	n.UserAgentVersionType = &core.Node_UserAgentVersion{UserAgentVersion: grpc.Version}
	n.ClientFeatures = gRPCClientFeatures
	return n
}

// EnvoyNode is the node of an Envoy proxy: Envoy's user agent, no
// GENERATOR.
func EnvoyNode(o NodeOptions) *core.Node {
	n := node(o, "")
	n.UserAgentName = "envoy"
	return n
}

func node(o NodeOptions, generator string) *core.Node {
	md := map[string]*structpb.Value{}
	for k, v := range o.Metadata {
		md[k] = structpb.NewStringValue(v)
	}
	if generator != "" {
		md["GENERATOR"] = structpb.NewStringValue(generator)
	}
	if o.Namespace != "" {
		md["NAMESPACE"] = structpb.NewStringValue(o.Namespace)
	}
	n := &core.Node{Id: o.ID, Locality: o.Locality}
	if len(md) > 0 {
		n.Metadata = &structpb.Struct{Fields: md}
	}
	return n
}

// SidecarID is an Istio-style node id,
// "sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local".
func SidecarID(ip, pod, namespace string) string {
	return fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.cluster.local", ip, pod, namespace, namespace)
}
