package translate

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// clusterScope decides, for one client and host, which clusters'
// endpoints the client gets and whether they carry their cluster in
// Istio's metadata. An endpoint without a cluster ID, and a client
// without CLUSTER_ID, are in the local cluster.
//
// A host MeshConfig serviceSettings marks clusterLocal is served to a
// client from the client's own cluster only, as in Istio. Such a result
// varies by the client's cluster even when every endpoint is in one
// cluster, since a client of another cluster must get none; in one
// cluster every client is in it, so the resource is still shared. The
// hosts that are not cluster-local (the common case) do not vary.
type clusterScope struct {
	local string
	// only, when set, is the one cluster whose endpoints the client gets.
	only string
	// label: some endpoint is in a cluster other than the local one, so
	// every endpoint carries its cluster (istio.workload metadata). A
	// host served from the local cluster alone stays as it was.
	label bool
}

// clusterScopeFor returns the scope of the client's traffic to svc and
// the endpoints of eps the client gets (eps itself when all); the caller
// depends on model.MeshServiceSettingsKey.
func (g *endpointGenerator) clusterScopeFor(c *Client, svc *model.Service, eps []*model.Endpoint) (clusterScope, []*model.Endpoint, Vary) {
	s := clusterScope{local: g.localCluster()}
	var vary Vary
	if g.isClusterLocal(svc.Hostname) {
		s.only = cmp.Or(c.ClusterID, s.local)
		vary = VaryCluster
		eps = s.filter(eps)
	}
	for _, ep := range eps {
		if s.cluster(ep) != s.local {
			s.label = true
			break
		}
	}
	return s, eps, vary
}

// filter returns the endpoints of cluster s.only, eps itself when that
// is all of them: the model's slices are shared and never written.
func (s *clusterScope) filter(eps []*model.Endpoint) []*model.Endpoint {
	for i, ep := range eps {
		if s.cluster(ep) == s.only {
			continue
		}
		out := slices.Clone(eps[:i])
		for _, ep := range eps[i+1:] {
			if s.cluster(ep) == s.only {
				out = append(out, ep)
			}
		}
		return out
	}
	return eps
}

// cluster returns an endpoint's cluster ID.
func (s *clusterScope) cluster(ep *model.Endpoint) string { return cmp.Or(ep.ClusterID, s.local) }

// metadata is what an endpoint carries for the client: Istio's
// istio.workload filter metadata when the host spans clusters, else nil.
func (s *clusterScope) metadata(ep *model.Endpoint) *core.Metadata {
	if !s.label {
		return nil
	}
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{
			"workload": structpb.NewStringValue(workloadMetadata(ep, s.cluster(ep))),
		}},
	}}
}

// workloadMetadata is istiod's compressed telemetry metadata of an
// endpoint (util.AppendLbEndpointMetadata):
// "<workload>;<namespace>;<canonical name>;<canonical revision>;<cluster>",
// the revision left empty when it is the default "latest".
func workloadMetadata(ep *model.Endpoint, cluster string) string {
	workload := workloadName(ep)
	name := cmp.Or(ep.Labels["service.istio.io/canonical-name"], ep.Labels["app.kubernetes.io/name"],
		ep.Labels["app"], workload)
	rev := cmp.Or(ep.Labels["service.istio.io/canonical-revision"], ep.Labels["app.kubernetes.io/version"],
		ep.Labels["version"])
	return strings.Join([]string{workload, ep.Namespace, name, rev, cluster}, ";")
}

// workloadName is the name istiod gives the workload behind an endpoint:
// a Deployment's Pod is named after its Deployment ("<deployment>-<pod
// template hash>-<suffix>"), which the pod-template-hash label gives
// away; any other Pod (the model does not know other owners) or
// WorkloadEntry by its own name.
func workloadName(ep *model.Endpoint) string {
	if h := ep.Labels["pod-template-hash"]; h != "" {
		if i := strings.LastIndex(ep.PodName, "-"+h+"-"); i > 0 {
			return ep.PodName[:i]
		}
	}
	return ep.PodName
}

func (o GeneratorOptions) localCluster() string {
	return cmp.Or(o.LocalClusterID, model.DefaultClusterID)
}

// isClusterLocal reports whether the mesh settings make host
// cluster-local; what reads it depends on model.MeshServiceSettingsKey.
func (o GeneratorOptions) isClusterLocal(host model.Hostname) bool {
	if o.clusterLocal == nil {
		return o.MeshSettings().ClusterLocal(host, o.suffix())
	}
	return o.clusterLocal.table(o.MeshSettings(), o.suffix()).IsClusterLocal(host)
}

// clusterLocalTable keeps the cluster-local table of the latest mesh
// settings, so that generating endpoints does not rebuild it each time.
type clusterLocalTable struct {
	mu    sync.Mutex // guards mesh and hosts
	mesh  *model.MeshSettings
	hosts model.ClusterLocalHosts
}

func (t *clusterLocalTable) table(m *model.MeshSettings, suffix string) model.ClusterLocalHosts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mesh != m {
		t.mesh, t.hosts = m, m.ClusterLocalHosts(suffix)
	}
	return t.hosts
}
