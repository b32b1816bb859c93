package serviceentry

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// entry is a ServiceEntry converted, before WorkloadEntries are selected.
type entry struct {
	namespace, name string
	// created orders the definitions of one host from several
	// namespaces: the oldest first, as istiod orders services.
	created time.Time
	// services holds one service per served host, in the order of
	// spec.hosts; hostPaths the field of each ("spec.hosts[1]").
	services  []*model.Service
	hostPaths []string
	// endpoints are spec.endpoints, one per endpoint and service port,
	// shared by every host.
	endpoints []*model.Endpoint
	// selector is spec.workloadSelector.labels; selects is false without
	// a workloadSelector (an empty one selects every WorkloadEntry of
	// the namespace).
	selector model.Labels
	selects  bool
	// staticOnly: only workloads with an IP address may serve (STATIC);
	// a DNS entry resolves names too.
	staticOnly bool
	// none: resolution NONE, which serves no endpoint.
	none bool
}

func (e *entry) key() string { return e.namespace + "/" + e.name }

// convertServiceEntry turns a ServiceEntry into one service per host, as
// Istio does, or refuses it with the first field that cannot work. Its
// status also lists the fields no client gets.
func convertServiceEntry(se *networkingv1.ServiceEntry, domainSuffix string) (*entry, configstatus.Status) {
	spec := &se.Spec
	e := &entry{namespace: se.Namespace, name: se.Name, created: se.CreationTimestamp.Time}
	var st configstatus.Status
	ignore := func(path, why string) {
		f := configstatus.Field{Path: path, Why: why}
		st.IgnoredGRPC = append(st.IgnoredGRPC, f)
		st.IgnoredEnvoy = append(st.IgnoredEnvoy, f)
	}
	refuse := func(path, why string) (*entry, configstatus.Status) {
		return nil, configstatus.Refuse(path, why)
	}

	res := spec.GetResolution()
	dns := res == apinetworking.ServiceEntry_DNS || res == apinetworking.ServiceEntry_DNS_ROUND_ROBIN
	if len(spec.GetHosts()) == 0 {
		return refuse("spec.hosts", "a ServiceEntry needs at least one host")
	}
	if spec.GetWorkloadSelector() != nil && len(spec.GetEndpoints()) > 0 {
		return refuse("spec.workloadSelector", "a ServiceEntry has endpoints or a workloadSelector, not both")
	}
	resolvesHosts := dns && len(spec.GetEndpoints()) == 0 && spec.GetWorkloadSelector() == nil
	if res == apinetworking.ServiceEntry_DNS_ROUND_ROBIN && len(spec.GetEndpoints()) > 1 {
		// As Istio validates it: the client connects to one name.
		return refuse("spec.endpoints", "resolution DNS_ROUND_ROBIN takes at most one endpoint")
	}

	ports, bad := convertPorts(spec.GetPorts())
	if bad != nil {
		return nil, configstatus.Status{Refused: bad}
	}
	for i, a := range spec.GetAddresses() {
		if _, err := netip.ParsePrefix(a); err != nil && !isIP(a) {
			return refuse(fmt.Sprintf("spec.addresses[%d]", i), fmt.Sprintf("%q is neither an IP address nor a CIDR", a))
		}
	}

	seen := map[string]int{}
	for i, h := range spec.GetHosts() {
		path := fmt.Sprintf("spec.hosts[%d]", i)
		switch {
		case h == "*":
			return refuse(path, "a ServiceEntry cannot define every host")
		case !strings.Contains(h, "."):
			// Istio reads a ServiceEntry's hosts as written, never
			// against the namespace, so a short name would be a host
			// no client asks for.
			return refuse(path, fmt.Sprintf("%q is a short name: a ServiceEntry's hosts are fully qualified", h))
		case strings.HasPrefix(h, "*."):
			if resolvesHosts {
				return refuse(path, "resolution DNS without endpoints resolves each host, and a wildcard cannot be resolved")
			}
			ignore(path, "wildcard hosts are not served yet")
			continue
		case !isDNSName(h):
			return refuse(path, fmt.Sprintf("%q is not a DNS name", h))
		}
		if j, dup := seen[strings.ToLower(h)]; dup {
			return refuse(path, fmt.Sprintf("host %q is already spec.hosts[%d]", h, j))
		}
		seen[strings.ToLower(h)] = i
		svc := &model.Service{
			Hostname:     model.Hostname(h),
			Name:         h,
			Namespace:    se.Namespace,
			Ports:        ports,
			Resolution:   model.ClientSideLB,
			ClusterIPs:   slices.Clone(spec.GetAddresses()),
			Labels:       maps.Clone(se.Labels),
			MeshExternal: spec.GetLocation() == apinetworking.ServiceEntry_MESH_EXTERNAL,
			ExportTo:     slices.Clone(spec.GetExportTo()),
			// Verified by ISTIO_MUTUAL with its endpoints' identities.
			ServiceAccounts: slices.Clone(spec.GetSubjectAltNames()),
		}
		switch {
		case resolvesHosts:
			svc.Resolution, svc.ExternalName = model.DNSAlias, h
		case dns:
			svc.Resolution = model.DNSAlias
		case res == apinetworking.ServiceEntry_NONE:
			svc.Resolution = model.Passthrough
		}
		e.services = append(e.services, svc)
		e.hostPaths = append(e.hostPaths, path)
	}

	for i, ep := range spec.GetEndpoints() {
		path := fmt.Sprintf("spec.endpoints[%d]", i)
		w, bad := convertWorkload(ep, se.Namespace, path)
		if bad != nil {
			return nil, configstatus.Status{Refused: bad}
		}
		if !dns && !w.isIP {
			return refuse(path+".address", fmt.Sprintf("%q is not an IP address: only resolution DNS resolves names", w.address))
		}
		for _, name := range slices.Sorted(maps.Keys(w.ports)) {
			if !slices.ContainsFunc(ports, func(p model.Port) bool { return p.Name == name }) {
				return refuse(path+".ports."+name, fmt.Sprintf("the ServiceEntry has no port named %q", name))
			}
		}
		for _, p := range ports {
			if out := w.endpoint(p); out != nil {
				e.endpoints = append(e.endpoints, out)
			}
		}
	}
	if ws := spec.GetWorkloadSelector(); ws != nil {
		e.selects, e.selector = true, model.Labels(maps.Clone(ws.GetLabels()))
	}
	e.staticOnly = !dns

	if res == apinetworking.ServiceEntry_NONE {
		// Istio sends Envoy an ORIGINAL_DST cluster (forward to the
		// address the application dialled); a gRPC client has no such
		// address to go to.
		e.none = true
		ignore("spec.resolution", "resolution NONE: the service is served without endpoints (no passthrough to the dialled address)")
		if len(e.endpoints) > 0 || e.selects {
			e.endpoints, e.selects = nil, false
			ignore("spec.endpoints", "resolution NONE serves no endpoints")
		}
	}
	return e, st
}

// convertPorts reads spec.ports: each needs a number and a name unique in
// the entry (endpoints and WorkloadEntries map their ports by name). The
// target port defaults to the number. A port without protocol is served
// with its protocol unknown (model.Unsupported), as istiod serves it
// (its protocol is sniffed where a proxy can); a protocol Istio does not
// know is refused, as Istio's validation refuses it.
func convertPorts(in []*apinetworking.ServicePort) ([]model.Port, *configstatus.Field) {
	out := make([]model.Port, 0, len(in))
	for i, p := range in {
		path := fmt.Sprintf("spec.ports[%d]", i)
		switch {
		case p.GetNumber() == 0 || p.GetNumber() > 65535:
			return nil, &configstatus.Field{Path: path + ".number", Why: "a port needs a number from 1 to 65535"}
		case p.GetProtocol() != "" && kubeconv.ProtocolByName(p.GetProtocol()) == model.Unsupported:
			return nil, &configstatus.Field{Path: path + ".protocol", Why: fmt.Sprintf("unknown protocol %q", p.GetProtocol())}
		case p.GetName() == "":
			return nil, &configstatus.Field{Path: path + ".name", Why: "a port needs a name: endpoints map their ports by it"}
		case p.GetTargetPort() > 65535:
			return nil, &configstatus.Field{Path: path + ".targetPort", Why: "a target port is from 1 to 65535"}
		}
		mp := model.Port{
			Name:       p.GetName(),
			Port:       int32(p.GetNumber()),
			TargetPort: int32(p.GetTargetPort()),
			Protocol:   kubeconv.ProtocolByName(p.GetProtocol()),
		}
		if mp.TargetPort == 0 {
			mp.TargetPort = mp.Port
		}
		for j, q := range out {
			switch {
			case q.Name == mp.Name:
				return nil, &configstatus.Field{Path: path + ".name", Why: fmt.Sprintf("spec.ports[%d] has the same name", j)}
			case q.Port == mp.Port:
				return nil, &configstatus.Field{Path: path + ".number", Why: fmt.Sprintf("spec.ports[%d] has the same number", j)}
			}
		}
		out = append(out, mp)
	}
	return out, nil
}
