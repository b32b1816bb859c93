package translate

import (
	"net/netip"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Client is what the generators need to know about the node that asks.
type Client struct {
	// ID is the node id, used in logs.
	ID string
	// Namespace is the client's namespace; relative listener names are
	// resolved in it. Empty when unknown.
	Namespace string
	// GRPC is true for proxyless gRPC clients. Other clients are treated as
	// Envoy and may subscribe to everything (wildcard).
	GRPC bool
	// IPs are the workload's addresses, as Istio reads them: metadata
	// INSTANCE_IPS (comma-separated), else the node id's address. A gRPC
	// server's inbound listener is decided by the services whose endpoints
	// hold one of them. Nil when unknown.
	IPs []string
	// NodeName is the Kubernetes node the client runs on (node metadata
	// NODE_NAME), and Locality where it runs (the node's locality); empty
	// when unknown.
	NodeName string
	Locality model.Locality
	// ClusterID is the cluster the client runs in (node metadata
	// CLUSTER_ID, as Istio's proxies send it); the server sets the local
	// cluster's ID when the node names none.
	ClusterID string
}

// ClientFromNode classifies a node as the xDS naming contract says: the
// namespace comes from metadata NAMESPACE, else from an Istio-style node id
// "sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local"; a node
// is a gRPC client when its metadata says GENERATOR=grpc or its user agent
// is a gRPC one ("gRPC Go", "gRPC Java", ...).
func ClientFromNode(n *core.Node) Client {
	c := Client{ID: n.GetId()}
	fields := n.GetMetadata().GetFields()
	if v := fields["NAMESPACE"].GetStringValue(); v != "" {
		c.Namespace = v
	} else {
		c.Namespace = namespaceFromID(n.GetId())
	}
	c.IPs = instanceIPs(fields["INSTANCE_IPS"].GetStringValue(), n.GetId())
	c.NodeName = fields["NODE_NAME"].GetStringValue()
	c.ClusterID = fields["CLUSTER_ID"].GetStringValue()
	if l := n.GetLocality(); l != nil {
		c.Locality = model.Locality{Region: l.GetRegion(), Zone: l.GetZone(), Subzone: l.GetSubZone()}
	}
	if strings.EqualFold(fields["GENERATOR"].GetStringValue(), "grpc") {
		c.GRPC = true
	}
	if ua := strings.ToLower(n.GetUserAgentName()); strings.HasPrefix(ua, "grpc") {
		c.GRPC = true
	}
	return c
}

// instanceIPs reads the workload's addresses from INSTANCE_IPS, else from
// the id "type~ip~pod.ns~ns.svc.domain"; what is not an IP address is
// dropped, so that a malformed node matches no endpoint.
func instanceIPs(metadata, id string) []string {
	var candidates []string
	if metadata != "" {
		candidates = strings.Split(metadata, ",")
	} else if parts := strings.Split(id, "~"); len(parts) == 4 {
		candidates = parts[1:2]
	}
	var out []string
	for _, s := range candidates {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// namespaceFromID reads the namespace from "type~ip~pod.ns~ns.svc.domain".
func namespaceFromID(id string) string {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return ""
	}
	if ns, _, _ := strings.Cut(parts[3], "."); ns != "" {
		return ns
	}
	if _, ns, ok := strings.Cut(parts[2], "."); ok {
		return ns
	}
	return ""
}
