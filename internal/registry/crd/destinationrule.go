package crd

import (
	"strings"

	apinetworking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// ruleHost resolves a DestinationRule's host as Istio does
// (ResolveShortnameToFQDN): a name without a dot is a service of the
// rule's namespace; any other name is taken as written. Wildcard hosts
// are not served yet: false.
func ruleHost(host, namespace, domainSuffix string) (model.Hostname, bool) {
	if host == "" || strings.Contains(host, "*") {
		return "", false
	}
	if !strings.Contains(host, ".") {
		return model.ServiceHostname(host, namespace, domainSuffix), true
	}
	return model.Hostname(host), true
}

// ConvertDestinationRule turns a DestinationRule into the model's view
// and says what became of it; the rule is nil when the status refuses
// it (a wildcard host is not served yet).
func ConvertDestinationRule(dr *networkingv1.DestinationRule, domainSuffix string) (*model.DestinationRule, configstatus.Status) {
	host, ok := ruleHost(dr.Spec.GetHost(), dr.Namespace, domainSuffix)
	if !ok {
		why := "wildcard hosts are not served yet"
		if dr.Spec.GetHost() == "" {
			why = "a rule needs a host"
		}
		return nil, configstatus.Refuse("spec.host", why)
	}
	out := &model.DestinationRule{
		Namespace: dr.Namespace,
		Name:      dr.Name,
		Host:      host,
		Policy:    convertTrafficPolicy(dr.Spec.GetTrafficPolicy()),
		ExportTo:  dr.Spec.GetExportTo(),
	}
	for _, s := range dr.Spec.GetSubsets() {
		sub := model.Subset{Name: s.GetName(), Policy: convertTrafficPolicy(s.GetTrafficPolicy())}
		if len(s.GetLabels()) > 0 {
			sub.Labels = model.Labels(s.GetLabels())
		}
		out.Subsets = append(out.Subsets, sub)
	}
	return out, configstatus.Status{}
}

func convertTrafficPolicy(p *apinetworking.TrafficPolicy) *model.TrafficPolicy {
	if p == nil {
		return nil
	}
	out := &model.TrafficPolicy{
		LoadBalancer: convertLB(p.GetLoadBalancer()),
		MaxRequests:  p.GetConnectionPool().GetHttp().GetHttp2MaxRequests(),
	}
	for _, pl := range p.GetPortLevelSettings() {
		port := int32(pl.GetPort().GetNumber())
		if port == 0 {
			continue
		}
		if out.PortLevel == nil {
			out.PortLevel = map[int32]*model.TrafficPolicy{}
		}
		out.PortLevel[port] = &model.TrafficPolicy{
			LoadBalancer: convertLB(pl.GetLoadBalancer()),
			MaxRequests:  pl.GetConnectionPool().GetHttp().GetHttp2MaxRequests(),
		}
	}
	return out
}

// convertLB maps loadBalancer.simple. LEAST_CONN is the deprecated name
// of LEAST_REQUEST; PASSTHROUGH and UNSPECIFIED keep the default.
func convertLB(lb *apinetworking.LoadBalancerSettings) model.LoadBalancer {
	switch lb.GetSimple() {
	case apinetworking.LoadBalancerSettings_ROUND_ROBIN:
		return model.LBRoundRobin
	case apinetworking.LoadBalancerSettings_LEAST_REQUEST, apinetworking.LoadBalancerSettings_LEAST_CONN:
		return model.LBLeastRequest
	case apinetworking.LoadBalancerSettings_RANDOM:
		return model.LBRandom
	}
	return model.LBDefault
}
