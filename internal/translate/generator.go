package translate

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Generator builds the resources of one xDS type from the model. Adding a
// type is one file with its Generator and one line in Generators.
//
// Generate must depend only on the model's current content, the name, and
// the facts about the client that its Result's Vary names: the server
// (internal/xds) gives one client's result to every client that agrees
// on those facts, and keeps it until a model key among its Deps changes.
// The Vary of one name may differ between clients (a rule chosen by the
// client's namespace may or may not depend on its kind): the cache then
// tells the name's variants apart by every fact any of them named.
// Generators must be safe for concurrent use and must not call back into
// the server: streams' generations run under the server's lock, one at a
// time, while REST-JSON requests generate what the cache lacks outside
// it, concurrently with them and with one another.
type Generator interface {
	// Type is the type built.
	Type() ResourceType
	// Generate builds the resource called name for a client.
	Generate(c *Client, name string) Result
	// AllNames lists, in order, what a wildcard subscription of the type
	// gets (called only when Type().Wildcard). The list is a function of
	// the set of services: it changes only with a KindService key.
	AllNames() []string
}

// ResourceType describes an xDS type.
type ResourceType struct {
	// URL is the type URL.
	URL string
	// Short is the name operators know it by ("LDS", "CDS", ...), used in
	// logs, metrics and the sync state.
	Short string
	// FullState: a state-of-the-world response carries every subscribed
	// resource, and one left out is deleted (LDS and CDS, as the xDS
	// protocol says); otherwise responses carry only what changed.
	FullState bool
	// Wildcard: a client other than gRPC may subscribe to every resource
	// of the type (AllNames). gRPC clients always name what they want.
	Wildcard bool
}

// Result is what a Generator built for one name and client.
type Result struct {
	// Resource is nil when the name designates nothing for the client.
	Resource proto.Message
	// Deps are the model keys the result was built from, given also when
	// Resource is nil (what would make it appear): a change to one of
	// them drops the result and wakes the watches that hold it.
	Deps []model.ConfigKey
	// Vary names the facts about the client the result depends on; zero
	// when every client gets the same bytes.
	Vary Vary
}

// Vary is a set of facts about a client that a generated resource may
// depend on, like HTTP's Vary header: clients that agree on them share
// one generated, marshalled resource.
type Vary uint8

const (
	// VaryKind: gRPC clients and Envoy get different resources.
	VaryKind Vary = 1 << iota
	// VaryNamespace: the client's namespace matters (relative names).
	VaryNamespace
	// VaryNode: the Kubernetes node the client runs on matters.
	VaryNode
	// VaryZone: the client's region and zone matter.
	VaryZone
	// VaryAddresses: the client's addresses (Client.IPs) matter.
	VaryAddresses
	// VaryLocality: the client's region, zone and subzone matter.
	VaryLocality
	// VaryCluster: the client's cluster (Client.ClusterID) matters.
	VaryCluster
	// VaryLabels: the client's labels matter (a route's sourceLabels, a
	// DestinationRule's workloadSelector). Only what reads a rule that
	// selects by labels names it, so other clients keep sharing.
	VaryLabels
)

// Variant is the part of a client that a Vary selects; clients with equal
// variants share a resource. Comparable, so that a cache lookup allocates
// nothing.
type Variant struct {
	grpc         bool
	namespace    string
	node         string
	region, zone string
	subzone      string
	addresses    string // Client.IPs, joined by commas
	cluster      string
	labels       string // Client.labelsKey
}

// Of is the variant of c that v selects.
func (v Vary) Of(c *Client) Variant {
	var out Variant
	if v&VaryKind != 0 {
		out.grpc = c.GRPC
	}
	if v&VaryNamespace != 0 {
		out.namespace = c.Namespace
	}
	if v&VaryNode != 0 {
		out.node = c.NodeName
	}
	if v&VaryZone != 0 {
		out.region, out.zone = c.Locality.Region, c.Locality.Zone
	}
	if v&VaryLocality != 0 {
		out.region, out.zone, out.subzone = c.Locality.Region, c.Locality.Zone, c.Locality.Subzone
	}
	if v&VaryCluster != 0 {
		out.cluster = c.ClusterID
	}
	if v&VaryAddresses != 0 {
		out.addresses = strings.Join(c.IPs, ",")
	}
	if v&VaryLabels != 0 {
		out.labels = c.labelsKey
	}
	return out
}

// GeneratorOptions is what every generator reads.
type GeneratorOptions struct {
	// Discovery is the model.
	Discovery model.ServiceDiscovery
	// DomainSuffix ends every service hostname; "cluster.local" when
	// empty.
	DomainSuffix string
	// LocalClusterID names the cluster meshpilot runs in: an endpoint
	// without a cluster ID, and a client without CLUSTER_ID, are in it.
	// model.DefaultClusterID when empty.
	LocalClusterID string
	// Mesh publishes the mesh-wide settings; nil means Istio's defaults.
	// What reads them depends on the key of the part it reads
	// (model.MeshRetryKey, ...).
	Mesh model.MeshWatcher
	// Policies answers which DestinationRule a client's traffic to a
	// host follows; nil: none does. What reads it depends on the host's
	// model.DestinationRuleKey.
	Policies model.PolicyIndex
	// Routes answers which VirtualService a client's traffic to a host
	// follows; nil: none does. What reads it depends on the host's
	// model.VirtualServiceKey.
	Routes model.RouteIndex
	// Security answers which PeerAuthentications and
	// AuthorizationPolicies may apply to a gRPC server's workload; nil:
	// none does. What reads it depends on the workload's security keys
	// (model.AppendWorkloadSecurityKeys).
	Security model.SecurityIndex

	// clusterLocal, when set, keeps the cluster-local table of the
	// latest mesh settings (Generators sets it).
	clusterLocal *clusterLocalTable
}

var defaultMesh = model.DefaultMeshSettings()

// MeshSettings are the mesh settings the generators read: the latest
// that Mesh published, Istio's defaults when there is none.
func (o GeneratorOptions) MeshSettings() *model.MeshSettings {
	if o.Mesh == nil {
		return defaultMesh
	}
	if m := o.Mesh.Mesh(); m != nil {
		return m
	}
	return defaultMesh
}

func (o GeneratorOptions) suffix() string {
	return model.DomainSuffixOrDefault(o.DomainSuffix)
}

// Generators lists the types served, in the order a client is expected
// to ask for them. A new type is one line here.
func Generators(o GeneratorOptions) []Generator {
	if o.clusterLocal == nil {
		o.clusterLocal = &clusterLocalTable{}
	}
	return []Generator{
		&listenerGenerator{o},
		&routeGenerator{o},
		&clusterGenerator{o},
		&endpointGenerator{o},
	}
}
