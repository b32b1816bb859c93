// Package modelcase is the YAML format of the cases that show what
// meshpilot serves: a model (services and their endpoints, as the
// registries build it), Istio's objects, and the clients that ask for
// resources. The generators' golden test reads it, and so does the parity
// harness (internal/parity), which writes the same case into a cluster
// as Kubernetes objects for meshpilot and istiod alike.
package modelcase

import (
	"fmt"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Parse reads a case, refusing fields it does not know.
func Parse(raw []byte) (*Input, error) {
	var in Input
	if err := yaml.UnmarshalStrict(raw, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Input is a case: a model, Istio's objects, and the clients that ask
// for resources from it.
type Input struct {
	Services []Service `json:"services"`
	// DestinationRules are Istio's objects, converted as the Kubernetes
	// source converts them; rootNamespace is goldenRootNamespace.
	DestinationRules []*networkingv1.DestinationRule `json:"destinationRules"`
	// VirtualServices are Istio's, converted as the Kubernetes source
	// converts them.
	VirtualServices []*networkingv1.VirtualService `json:"virtualServices"`
	// ServiceEntries and WorkloadEntries are Istio's objects, served by
	// their registry (registry/serviceentry) as a source after the
	// services above, as serve places it.
	ServiceEntries  []*networkingv1.ServiceEntry  `json:"serviceEntries"`
	WorkloadEntries []*networkingv1.WorkloadEntry `json:"workloadEntries"`
	// HTTPRoutes and GRPCRoutes are the Gateway API's routes
	// (gateway.networking.k8s.io/v1), converted as the Kubernetes source
	// converts them, with ReferenceGrants (v1beta1); the case's services
	// are the Services that exist.
	HTTPRoutes      []*gatewayv1.HTTPRoute           `json:"httpRoutes"`
	GRPCRoutes      []*gatewayv1.GRPCRoute           `json:"grpcRoutes"`
	ReferenceGrants []*gatewayv1beta1.ReferenceGrant `json:"referenceGrants"`
	// PeerAuthentications and AuthorizationPolicies are security
	// policies in the model's form (Security), each list oldest first.
	PeerAuthentications   []PeerAuthentication  `json:"peerAuthentications"`
	AuthorizationPolicies []AuthorizationPolicy `json:"authorizationPolicies"`
	Clients               []Client              `json:"clients"`
}

// Client is a client of a case: its node, and the names it asks for of
// each type (Wildcard: every resource of the type as well).
type Client struct {
	Name      string            `json:"name"`
	ID        string            `json:"id"`
	UserAgent string            `json:"userAgent"`
	Metadata  map[string]string `json:"metadata"`
	// Locality is the node's, "region/zone/subzone".
	Locality  string   `json:"locality"`
	Wildcard  bool     `json:"wildcard"`
	Listeners []string `json:"listeners"`
	Routes    []string `json:"routes"`
	Clusters  []string `json:"clusters"`
	Endpoints []string `json:"endpoints"`
}

// Node is the client's node as it sends it.
func (c Client) Node() (*core.Node, error) {
	n := &core.Node{Id: c.ID, UserAgentName: c.UserAgent}
	if c.Locality != "" {
		l := model.ParseLocality(c.Locality)
		n.Locality = &core.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.Subzone}
	}
	if len(c.Metadata) > 0 {
		m := map[string]any{}
		for k, v := range c.Metadata {
			m[k] = v
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			return nil, fmt.Errorf("client %s: metadata: %w", c.Name, err)
		}
		n.Metadata = s
	}
	return n, nil
}

// Service is a service of a case and its endpoints.
type Service struct {
	// Source names the registry the service comes from. Services of
	// one source are one model.Store; several sources are served
	// through their aggregate, by order of first mention, as the
	// server serves its sources. Empty: the first source.
	Source       string       `json:"source"`
	Name         string       `json:"name"`
	Namespace    string       `json:"namespace"`
	Resolution   string       `json:"resolution"`
	ExternalName string       `json:"externalName"`
	ClusterIPs   []string     `json:"clusterIPs"`
	Ports        []model.Port `json:"ports"`
	// InternalTrafficPolicy is "Local" or empty; TrafficDistribution
	// "PreferSameZone", "PreferSameNode" or empty.
	InternalTrafficPolicy string `json:"internalTrafficPolicy"`
	TrafficDistribution   string `json:"trafficDistribution"`
	// Selector is a Kubernetes Service's: it selects WorkloadEntries.
	Selector model.Labels `json:"selector"`
	// ExportTo is the networking.istio.io/exportTo annotation's list.
	ExportTo  []string   `json:"exportTo"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is an endpoint of a case's service.
type Endpoint struct {
	Address  string       `json:"address"`
	Port     uint32       `json:"port"`
	PortName string       `json:"portName"`
	Locality string       `json:"locality"`
	Health   string       `json:"health"`
	Node     string       `json:"node"`
	Labels   model.Labels `json:"labels"`
	// ServiceAccount is the endpoint's Pod's.
	ServiceAccount string `json:"serviceAccount"`
	Pod            string `json:"pod"`
	// Cluster is the ID of the cluster the endpoint is in; empty:
	// the local one.
	Cluster string `json:"cluster"`
}

// PeerAuthentication is a security policy of a case in the model's form,
// its fields named as in Istio's spec.
type PeerAuthentication struct {
	Namespace string       `json:"namespace"`
	Name      string       `json:"name"`
	Selector  model.Labels `json:"selector"`
	// Mode and PortLevelMtls's values are Istio's modes: UNSET, DISABLE,
	// PERMISSIVE or STRICT.
	Mode          string            `json:"mode"`
	PortLevelMtls map[uint32]string `json:"portLevelMtls"`
}

// AuthorizationPolicy is a security policy of a case in the model's
// form, its fields named as in Istio's spec.
type AuthorizationPolicy struct {
	Namespace      string       `json:"namespace"`
	Name           string       `json:"name"`
	Selector       model.Labels `json:"selector"`
	TargetServices []string     `json:"targetServices"`
	// Action is ALLOW (when empty), DENY, AUDIT or CUSTOM.
	Action string `json:"action"`
	// Rules nil is a policy without rules; [{}] a rule matching all.
	Rules []AuthzRule `json:"rules"`
}

// AuthzRule is a rule as Istio writes it (from[].source,
// to[].operation, when).
type AuthzRule struct {
	From []struct {
		Source model.AuthzSource `json:"source"`
	} `json:"from"`
	To []struct {
		Operation model.AuthzOperation `json:"operation"`
	} `json:"to"`
	When []model.AuthzCondition `json:"when"`
}

// Security converts the case's security policies to the model's, their
// creation times in the order they are listed.
func (in *Input) Security() ([]*model.PeerAuthentication, []*model.AuthorizationPolicy, error) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var peers []*model.PeerAuthentication
	for i, p := range in.PeerAuthentications {
		mode, err := mtlsMode(p.Mode)
		if err != nil {
			return nil, nil, fmt.Errorf("PeerAuthentication %s/%s: %w", p.Namespace, p.Name, err)
		}
		out := &model.PeerAuthentication{Namespace: p.Namespace, Name: p.Name, Created: base.Add(time.Duration(i) * time.Second),
			Selector: p.Selector, Mode: mode}
		for port, m := range p.PortLevelMtls {
			mode, err := mtlsMode(m)
			if err != nil {
				return nil, nil, fmt.Errorf("PeerAuthentication %s/%s: port %d: %w", p.Namespace, p.Name, port, err)
			}
			if out.PortModes == nil {
				out.PortModes = map[uint32]model.MTLSMode{}
			}
			out.PortModes[port] = mode
		}
		peers = append(peers, out)
	}
	var authz []*model.AuthorizationPolicy
	for i, p := range in.AuthorizationPolicies {
		out := &model.AuthorizationPolicy{Namespace: p.Namespace, Name: p.Name, Created: base.Add(time.Duration(i) * time.Second),
			Selector: p.Selector, TargetServices: p.TargetServices}
		switch p.Action {
		case "", "ALLOW":
		case "DENY":
			out.Action = model.AuthzDeny
		case "AUDIT":
			out.Action = model.AuthzAudit
		case "CUSTOM":
			out.Action = model.AuthzCustom
		default:
			return nil, nil, fmt.Errorf("AuthorizationPolicy %s/%s: unknown action %q", p.Namespace, p.Name, p.Action)
		}
		for _, r := range p.Rules {
			var mr model.AuthzRule
			for _, f := range r.From {
				mr.From = append(mr.From, f.Source)
			}
			for _, t := range r.To {
				mr.To = append(mr.To, t.Operation)
			}
			mr.When = r.When
			out.Rules = append(out.Rules, mr)
		}
		authz = append(authz, out)
	}
	return peers, authz, nil
}

func mtlsMode(s string) (model.MTLSMode, error) {
	for _, m := range []model.MTLSMode{model.MTLSUnset, model.MTLSDisable, model.MTLSPermissive, model.MTLSStrict} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mTLS mode %q", s)
}
