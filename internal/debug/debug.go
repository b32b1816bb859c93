// Package debug serves meshpilot's debug pages: what the model holds and
// what each xDS client was sent, ACKed and NACKed, as JSON, and Go's
// pprof profiles. `meshpilot status` reads them.
//
//	/debug/registryz                  every service of the model
//	/debug/endpointz                  endpoints per service and port, with health, locality and cluster
//	/debug/syncz                      per xDS stream: client (its cluster: node metadata CLUSTER_ID), subscriptions,
//	                                  sent/ACKed/NACKed per type
//	/debug/config_dump?node=ID        the resources each stream of that node holds (ACKed), as protojson
//	/debug/configz                    the configuration in force: the mesh config, its source, the fields ignored;
//	                                  every Istio object and what became of it; the services whose
//	                                  ports differ between clusters (Configz)
//	/debug/consistencyz               audits the Kubernetes registry: its informer caches against a
//	                                  fresh LIST, its model against one rebuilt from it (audit.Report)
//	/debug/clusterz                   the local and remote clusters: state, since when, last error (istiod's page)
//	/debug/pprof/                     Go profiles
package debug

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/xds"
)

// XDS is what the debug pages read of the xDS server.
type XDS interface {
	Clients() []xds.ClientInfo
	ConfigDump(nodeID string) []xds.ClientConfig
}

// Options say what the pages show.
type Options struct {
	// Discovery is the model. Required.
	Discovery model.ServiceDiscovery
	// XDS is the xDS server. Required.
	XDS XDS
	// Mesh returns the mesh config in force; /debug/configz shows
	// Istio's defaults when nil.
	Mesh func() meshconfig.Status
	// Objects returns the status of every Istio object
	// (configstatus.Reporter.List); none when nil.
	Objects func() []configstatus.Entry
	// PortConflicts returns the hostnames whose sources' ports differ
	// (aggregate.Controller.PortConflicts); none when nil.
	PortConflicts func() []aggregate.PortConflict
	// LocalClusterID names the local cluster: on /debug/endpointz, the
	// cluster of endpoints that name none; on /debug/configz, that of
	// the local Kubernetes registry (aggregate.SourceLabel).
	// model.DefaultClusterID when empty.
	LocalClusterID string
	// Consistency audits the Kubernetes registry for
	// /debug/consistencyz; the page answers 404 when nil (files).
	Consistency Consistency
	// Clusters returns the clusters read, the local one first, for
	// /debug/clusterz; none when nil.
	Clusters func() []clusterstate.Cluster
	// AllowRemote serves the pages to every caller; otherwise only
	// callers on loopback get them, others 403 (access.go says why).
	AllowRemote bool
	// ConsistencyInterval is the least time between two audits the
	// page starts; DefaultConsistencyInterval when zero.
	ConsistencyInterval time.Duration
}

// Configz is what /debug/configz shows. `meshpilot status config` and
// scripts read it: fields are only ever added.
type Configz struct {
	MeshConfig meshconfig.Status `json:"meshConfig"`
	// Objects are the Istio objects meshpilot read (DestinationRules,
	// VirtualServices, ServiceEntries, WorkloadEntries,
	// PeerAuthentications, AuthorizationPolicies), ordered by kind,
	// namespace and name; [] when there are none.
	Objects []ConfigObject `json:"objects"`
	// ServiceConflicts are the hostnames defined with different ports by
	// several clusters or sources, ordered by hostname; [] when there are
	// none.
	ServiceConflicts []ServiceConflict `json:"serviceConflicts"`
}

// ServiceConflict is one hostname that several sources define with ports
// that differ in number, name or protocol (a Service of one name and
// namespace in several clusters):
//
//	{"hostname": "reviews.shop.svc.cluster.local",
//	 "served": "Kubernetes",                       // whose definition is served: the first
//	 "definedBy": ["Kubernetes", "cluster-b"],     // by precedence
//	 "ports": {"Kubernetes": [{"name": "grpc", "port": 8080, "protocol": "GRPC"}],
//	           "cluster-b": [{"name": "http", "port": 8080, "protocol": "HTTP"}]},
//	 "why": "ports differ; the first definition, Kubernetes's, is served: port 8080 is named ..."}
//
// A source is named by its cluster ID, remote or local (--cluster-id),
// or, for the others, by its own name ("serviceentries", "files").
type ServiceConflict struct {
	Hostname  model.Hostname          `json:"hostname"`
	Served    string                  `json:"served"`
	DefinedBy []string                `json:"definedBy"`
	Ports     map[string][]model.Port `json:"ports"`
	Why       string                  `json:"why"`
}

// ServiceConflicts turns the aggregate's port conflicts into the page's,
// each source named as aggregate.SourceLabel names it.
func ServiceConflicts(conflicts []aggregate.PortConflict, localClusterID string) []ServiceConflict {
	label := func(source string) string { return aggregate.SourceLabel(source, localClusterID) }
	out := make([]ServiceConflict, 0, len(conflicts))
	for _, c := range conflicts {
		sc := ServiceConflict{Hostname: c.Hostname, Ports: map[string][]model.Port{}, Why: c.Why(label)}
		for _, d := range c.Definitions {
			sc.DefinedBy = append(sc.DefinedBy, label(d.Source))
			sc.Ports[label(d.Source)] = d.Ports
		}
		if len(sc.DefinedBy) > 0 {
			sc.Served = sc.DefinedBy[0]
		}
		out = append(out, sc)
	}
	return out
}

// ConfigObject is one Istio object and what became of it:
//
//	{"kind": "VirtualService", "namespace": "shop", "name": "cart",
//	 "where": "rules.yaml:12 (document 2)",          // read from a file (serve --from)
//	 "state": "partial",                             // applied, partial or refused
//	 "refused": {"path": "spec.http[0].route", "why": "..."},   // when refused
//	 "ignoredForGRPC": [{"path": "spec.http[1].mirror", "why": "..."}],
//	 "ignoredForEnvoy": [{"path": "...", "why": "..."}],
//	 "merged": [{"path": "spec", "why": "merged into DestinationRule shop/cart, ..."}]}
//
// State "applied": every client gets all of it; "partial": applied, but
// some fields are not sent to one kind of client (ignoredForGRPC,
// ignoredForEnvoy say which and why); "refused": not applied (refused
// names the first problem), and the object's last good version, if any,
// stays in force. "merged" says which older object of the same host an
// applied object is merged into, as Istio merges them. Empty lists and
// fields are left out.
type ConfigObject struct {
	configstatus.Ref
	State string `json:"state"`
	configstatus.Status
}

// ConfigObjects turns a Reporter's entries into the page's objects.
func ConfigObjects(entries []configstatus.Entry) []ConfigObject {
	out := make([]ConfigObject, 0, len(entries))
	for _, e := range entries {
		out = append(out, ConfigObject{Ref: e.Ref, State: e.State(), Status: e.Status})
	}
	return out
}

// Register adds the debug pages to mux, under /debug/: for callers on
// loopback only, unless o.AllowRemote.
func Register(outer *http.ServeMux, o Options) {
	o.LocalClusterID = cmp.Or(o.LocalClusterID, model.DefaultClusterID)
	mux := http.NewServeMux()
	if o.AllowRemote {
		outer.Handle("/debug/", mux)
	} else {
		outer.Handle("/debug/", localOnly(mux))
	}
	mux.HandleFunc("GET /debug/registryz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, o.Discovery.Services())
	})
	mux.HandleFunc("GET /debug/endpointz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, Endpointz(o.Discovery, o.LocalClusterID))
	})
	mux.HandleFunc("GET /debug/syncz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, Syncz(o.XDS.Clients()))
	})
	mux.HandleFunc("GET /debug/config_dump", func(w http.ResponseWriter, r *http.Request) {
		node := r.URL.Query().Get("node")
		if node == "" {
			http.Error(w, "name a client: /debug/config_dump?node=<node id> (see /debug/syncz)", http.StatusBadRequest)
			return
		}
		dump, err := ConfigDump(node, o.XDS.ConfigDump(node))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(dump.Streams) == 0 {
			http.Error(w, fmt.Sprintf("no xDS client with node id %q is connected", node), http.StatusNotFound)
			return
		}
		writeJSON(w, dump)
	})
	mux.HandleFunc("GET /debug/configz", func(w http.ResponseWriter, _ *http.Request) {
		mesh := meshconfig.Default().Status("")
		if o.Mesh != nil {
			mesh = o.Mesh()
		}
		var objects []configstatus.Entry
		if o.Objects != nil {
			objects = o.Objects()
		}
		var conflicts []aggregate.PortConflict
		if o.PortConflicts != nil {
			conflicts = o.PortConflicts()
		}
		writeJSON(w, Configz{MeshConfig: mesh, Objects: ConfigObjects(objects),
			ServiceConflicts: ServiceConflicts(conflicts, o.LocalClusterID)})
	})
	mux.HandleFunc("GET /debug/consistencyz", consistencyz(o.Consistency, &auditLimit{interval: cmp.Or(o.ConsistencyInterval, DefaultConsistencyInterval)}))
	registerClusterz(mux, o.Clusters)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ServiceEndpoints are the endpoints of one service, per port.
type ServiceEndpoints struct {
	Hostname model.Hostname `json:"hostname"`
	// Namespace is the defining namespace of each definition of a host
	// that several namespaces define (model.Service.Others), one entry
	// each; empty for any other host.
	Namespace string          `json:"namespace,omitempty"`
	Ports     []PortEndpoints `json:"ports"`
}

// PortEndpoints are the endpoints serving one service port.
type PortEndpoints struct {
	Port      int32             `json:"port"`
	Name      string            `json:"name,omitempty"`
	Protocol  model.Protocol    `json:"protocol"`
	Endpoints []*model.Endpoint `json:"endpoints"`
}

// Endpointz lists the endpoints of every service, per port, in hostname
// and port order, each with its cluster: localClusterID for those that
// name none.
func Endpointz(d model.ServiceDiscovery, localClusterID string) []ServiceEndpoints {
	svcs := d.Services()
	out := make([]ServiceEndpoints, 0, len(svcs))
	for _, s := range svcs {
		if len(s.Others) == 0 {
			out = append(out, serviceEndpoints(d, s, "", localClusterID))
			continue
		}
		out = append(out, serviceEndpoints(d, s, s.Namespace, localClusterID))
		for _, o := range s.Others {
			out = append(out, serviceEndpoints(d, o, o.Namespace, localClusterID))
		}
	}
	return out
}

func serviceEndpoints(d model.ServiceDiscovery, s *model.Service, ns, localClusterID string) ServiceEndpoints {
	se := ServiceEndpoints{Hostname: s.Hostname, Namespace: ns, Ports: []PortEndpoints{}}
	for _, p := range s.Ports {
		eps := model.EndpointsByPortNameOf(d, s, p.Name, nil)
		se.Ports = append(se.Ports, PortEndpoints{Port: p.Port, Name: p.Name, Protocol: p.Protocol, Endpoints: withCluster(eps, localClusterID)})
	}
	return se
}

// withCluster returns copies of the endpoints, each naming its cluster:
// the model's are shared and leave the local cluster unnamed.
func withCluster(eps []*model.Endpoint, localClusterID string) []*model.Endpoint {
	out := make([]*model.Endpoint, len(eps))
	for i, ep := range eps {
		c := *ep
		c.ClusterID = cmp.Or(c.ClusterID, localClusterID)
		out[i] = &c
	}
	return out
}

// SyncStatus is one xDS stream as /debug/syncz shows it.
type SyncStatus struct {
	// Type is "grpc" or "envoy".
	Type string `json:"type"`
	xds.ClientInfo
}

// Syncz describes the connected streams.
func Syncz(clients []xds.ClientInfo) []SyncStatus {
	out := make([]SyncStatus, 0, len(clients))
	for _, c := range clients {
		out = append(out, SyncStatus{Type: c.Kind(), ClientInfo: c})
	}
	return out
}

// Dump is what /debug/config_dump answers for one node.
type Dump struct {
	Node    string       `json:"node"`
	Streams []StreamDump `json:"streams"`
}

// StreamDump is what one stream of the node holds.
type StreamDump struct {
	Stream    int64               `json:"stream"`
	Delta     bool                `json:"delta"`
	Connected time.Time           `json:"connected"`
	Types     map[string]TypeDump `json:"types"`
}

// TypeDump is the ACKed state of one resource type.
type TypeDump struct {
	Version string `json:"version"`
	// Resources are protojson, each with its "@type".
	Resources []json.RawMessage `json:"resources"`
}

// ConfigDump renders what the streams of a node hold.
func ConfigDump(node string, streams []xds.ClientConfig) (Dump, error) {
	d := Dump{Node: node, Streams: []StreamDump{}}
	for _, s := range streams {
		sd := StreamDump{Stream: s.Stream, Delta: s.Delta, Connected: s.Connected, Types: map[string]TypeDump{}}
		for _, typ := range slices.Sorted(maps.Keys(s.Resources)) {
			td := TypeDump{Resources: []json.RawMessage{}}
			if ts := s.Types[typ]; ts != nil && ts.LastACK != nil {
				td.Version = ts.LastACK.Version
			}
			for _, a := range s.Resources[typ] {
				b, err := protojson.Marshal(a)
				if err != nil {
					return Dump{}, fmt.Errorf("rendering a %s resource of %s: %w", typ, node, err)
				}
				td.Resources = append(td.Resources, b)
			}
			sd.Types[typ] = td
		}
		d.Streams = append(d.Streams, sd)
	}
	return d, nil
}
