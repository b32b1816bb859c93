package translate

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

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

	// labels are the workload's labels (SetLabels), which a route's
	// sourceLabels match; labelsKey is the same as one comparable
	// string, the client's VaryLabels variant, computed once.
	labels    map[string]string
	labelsKey string
}

// Bounds on the labels a client's node may give (node metadata LABELS),
// as Kubernetes bounds a Pod's: what the node says is untrusted, and the
// labels live as long as the stream and make a cache variant of their
// own when a route depends on them. A label beyond them is dropped,
// which can only make the client match fewer rules.
const (
	// MaxClientLabels is the most labels kept, the first by key.
	MaxClientLabels = 64
	// maxLabelKeyBytes: a DNS subdomain prefix, "/", a 63-byte name.
	maxLabelKeyBytes   = 253 + 1 + 63
	maxLabelValueBytes = 63
)

// Labels returns the client's labels; they must not be changed.
func (c *Client) Labels() map[string]string { return c.labels }

// SetLabels makes labels the client's, within MaxClientLabels, the
// key and value sizes Kubernetes allows (others are dropped). The map is
// copied.
func (c *Client) SetLabels(labels map[string]string) {
	c.labels, c.labelsKey = nil, ""
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		if k != "" && len(k) <= maxLabelKeyBytes && len(v) <= maxLabelValueBytes {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	keys = keys[:min(len(keys), MaxClientLabels)]
	c.labels = make(map[string]string, len(keys))
	var b []byte
	for _, k := range keys {
		v := labels[k]
		c.labels[k] = v
		// Each string after its length: a value the client sends may
		// hold any byte, and two label sets must never share a key.
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	c.labelsKey = string(b)
}

// nodeLabels reads node metadata LABELS, a map of strings as Istio's
// bootstraps write it; a value that is not a string is dropped.
func nodeLabels(v *structpb.Value) map[string]string {
	fields := v.GetStructValue().GetFields()
	if len(fields) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(fields), MaxClientLabels))
	for k, f := range fields {
		if s, ok := f.GetKind().(*structpb.Value_StringValue); ok {
			out[k] = s.StringValue
		}
	}
	return out
}

// ClientFromNode classifies a node as the xDS naming contract says: the
// namespace comes from metadata NAMESPACE, else from an Istio-style node id
// "sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local", the
// labels from metadata LABELS (SetLabels bounds them); a node
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
	c.SetLabels(nodeLabels(fields["LABELS"]))
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
