package crd

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	securityapi "istio.io/api/security/v1beta1"
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// Why a proxyless gRPC server does not enforce a field as written. grpc-go
// authenticates no request (no JWT), so what reads a request's
// credentials cannot be checked: meshpilot fails closed. An ALLOW rule
// with such a field never matches. In a DENY rule the field is taken to
// match every call, so the rule denies more. istiod serves these fields
// to gRPC servers as metadata matchers, which grpc-go never matches (and
// a negated one always): the same for an ALLOW rule's values and a DENY
// rule's negated values, but a DENY rule's values then deny nothing and
// an ALLOW rule's negated values allow more, where meshpilot fails
// closed.
const (
	whyJWTAllow = "proxyless gRPC servers authenticate no request (no JWT), so this cannot be checked: the rule never matches, so it allows no call (fail closed)"
	whyJWTDeny  = "proxyless gRPC servers authenticate no request (no JWT), so this cannot be checked: it is taken to match every call, so the rule denies more (fail closed; istiod's matcher never matches under grpc-go, so there the rule would deny nothing)"
	// The negated forms, where istiod's differs the other way.
	whyNotJWTAllow = "proxyless gRPC servers authenticate no request (no JWT), so this cannot be checked: the rule never matches, so it allows no call (fail closed; istiod's negated matcher always matches under grpc-go, so there the rule would allow more)"
	whyNotJWTDeny  = "proxyless gRPC servers authenticate no request (no JWT), so this cannot be checked: it is taken to match every call, so the rule denies more (fail closed, as under istiod)"

	whyAudit  = "proxyless gRPC servers get ALLOW and DENY policies only, as from istiod: an AUDIT policy changes nothing for them"
	whyCustom = "proxyless gRPC servers cannot call an external authorizer, and istiod serves them ALLOW and DENY policies only: a CUSTOM policy is not enforced on them"

	whyRemoteIP = "grpc-go reads no X-Forwarded-For or PROXY header: it checks the address of the peer, as for ipBlocks (gRFC A41)"

	whyTargetService = "applied to the gRPC servers behind this Service (its Pods' labels); istiod applies targetRefs to waypoints and Gateway API gateways only and ignores this policy for sidecars and gRPC servers"
	whyTargetOther   = "a policy attached to this kind applies to gateways or waypoints, never to a gRPC server"
)

// ConvertAuthorizationPolicy converts an AuthorizationPolicy into the
// model, refusing (nil, Status.Refused) what istiod's validation refuses
// (ValidateAuthorizationPolicy). It returns nil and no refusal for a
// policy that applies to no gRPC server (targetRefs of gateways alone).
// Status.IgnoredGRPC says which fields gRPC servers cannot enforce as
// written, and what they do instead.
func ConvertAuthorizationPolicy(ap *securityv1.AuthorizationPolicy) (*model.AuthorizationPolicy, configstatus.Status) {
	spec := &ap.Spec
	out := &model.AuthorizationPolicy{Namespace: ap.Namespace, Name: ap.Name, Created: ap.CreationTimestamp.Time}
	var st configstatus.Status
	switch spec.GetAction() {
	case securityapi.AuthorizationPolicy_DENY:
		out.Action = model.AuthzDeny
	case securityapi.AuthorizationPolicy_AUDIT:
		out.Action = model.AuthzAudit
		st.IgnoreGRPC("spec.action", whyAudit)
	case securityapi.AuthorizationPolicy_CUSTOM:
		out.Action = model.AuthzCustom
		st.IgnoreGRPC("spec.action", whyCustom)
	}

	targetRefs, targetPath := spec.GetTargetRefs(), "spec.targetRefs"
	if len(targetRefs) == 0 && spec.GetTargetRef() != nil {
		targetRefs, targetPath = []*typeapi.PolicyTargetReference{spec.GetTargetRef()}, "spec.targetRef"
	}
	if spec.GetSelector() != nil && len(targetRefs) > 0 || spec.GetTargetRef() != nil && len(spec.GetTargetRefs()) > 0 {
		return nil, configstatus.Refuse("spec", "only one of selector, targetRef and targetRefs may be set")
	}
	if bad, refused := checkSelector(spec.GetSelector()); refused {
		return nil, bad
	}
	if labels := spec.GetSelector().GetMatchLabels(); len(labels) > 0 {
		out.Selector = model.Labels(labels)
	}
	for i, ref := range targetRefs {
		path := targetPath
		if targetPath == "spec.targetRefs" {
			path = fmt.Sprintf("%s[%d]", targetPath, i)
		}
		service, why := checkTargetRef(ref)
		switch {
		case why != "":
			return nil, configstatus.Refuse(path, why)
		case service:
			out.TargetServices = append(out.TargetServices, ref.GetName())
			st.IgnoreGRPC(path, whyTargetService)
		default:
			st.IgnoreGRPC(path, whyTargetOther)
		}
	}

	if why := checkAction(spec); why.Refused != nil {
		return nil, why
	}
	for i, rule := range spec.GetRules() {
		r, refused := convertRule(rule, fmt.Sprintf("spec.rules[%d]", i), out.Action, &st)
		if refused != nil {
			return nil, configstatus.Status{Refused: refused}
		}
		out.Rules = append(out.Rules, r)
	}
	st.IgnoreEnvoy("spec", whyNoEnvoyInbound)
	if len(targetRefs) > 0 && len(out.TargetServices) == 0 {
		return nil, st // attached to gateways alone
	}
	return out, st
}

// checkTargetRef reports whether ref names a Service, or why it is
// refused. istiod accepts Services, ServiceEntries, Gateway API Gateways
// and GatewayClasses, of the policy's own namespace.
func checkTargetRef(ref *typeapi.PolicyTargetReference) (service bool, why string) {
	switch {
	case ref == nil:
		return false, "a target must not be null"
	case ref.GetName() == "":
		return false, "a target needs a name"
	case ref.GetNamespace() != "":
		return false, "a target must be of the policy's namespace: namespace must not be set"
	}
	group := ref.GetGroup()
	switch {
	case (group == "" || group == "core") && ref.GetKind() == "Service":
		return true, ""
	case group == "networking.istio.io" && ref.GetKind() == "ServiceEntry",
		group == "gateway.networking.k8s.io" && (ref.GetKind() == "Gateway" || ref.GetKind() == "GatewayClass"):
		return false, ""
	}
	return false, fmt.Sprintf("a target must be a Service, a ServiceEntry (networking.istio.io), a Gateway or a GatewayClass (gateway.networking.k8s.io), not %s/%s", group, ref.GetKind())
}

// checkAction refuses what istiod refuses of an action: DENY or CUSTOM
// without rules (never triggered), CUSTOM without a provider name or with
// fields it cannot send the authorizer, a provider on another action.
func checkAction(spec *securityapi.AuthorizationPolicy) configstatus.Status {
	action := spec.GetAction()
	if action != securityapi.AuthorizationPolicy_CUSTOM && spec.GetProvider() != nil {
		return configstatus.Refuse("spec.provider", "a provider is for the CUSTOM action only")
	}
	if (action == securityapi.AuthorizationPolicy_DENY || action == securityapi.AuthorizationPolicy_CUSTOM) && spec.Rules == nil {
		return configstatus.Refuse("spec.rules", fmt.Sprintf("a %s policy without rules never matches: add an empty rule {} to match every call", action))
	}
	if action != securityapi.AuthorizationPolicy_CUSTOM {
		return configstatus.Status{}
	}
	if spec.GetProvider().GetName() == "" {
		return configstatus.Refuse("spec.provider.name", "a CUSTOM policy needs its provider's name")
	}
	for i, rule := range spec.GetRules() {
		for j, from := range rule.GetFrom() {
			src := from.GetSource()
			for _, f := range []struct {
				name string
				set  bool
			}{
				{"namespaces", len(src.GetNamespaces()) > 0}, {"notNamespaces", len(src.GetNotNamespaces()) > 0},
				{"serviceAccounts", len(src.GetServiceAccounts()) > 0}, {"notServiceAccounts", len(src.GetNotServiceAccounts()) > 0},
				{"trustDomains", len(src.GetTrustDomains()) > 0}, {"notTrustDomains", len(src.GetNotTrustDomains()) > 0},
				{"principals", len(src.GetPrincipals()) > 0}, {"notPrincipals", len(src.GetNotPrincipals()) > 0},
				{"requestPrincipals", len(src.GetRequestPrincipals()) > 0}, {"notRequestPrincipals", len(src.GetNotRequestPrincipals()) > 0},
			} {
				if f.set {
					return configstatus.Refuse(fmt.Sprintf("spec.rules[%d].from[%d].source.%s", i, j, f.name), "not supported with the CUSTOM action")
				}
			}
		}
		for j, when := range rule.GetWhen() {
			switch k := when.GetKey(); {
			case k == attrSrcNamespace, k == attrSrcServiceAccount, k == attrSrcTrustDomain, k == attrSrcPrincipal,
				strings.HasPrefix(k, "request.auth."):
				return configstatus.Refuse(fmt.Sprintf("spec.rules[%d].when[%d].key", i, j), k+" is not supported with the CUSTOM action")
			}
		}
	}
	return configstatus.Status{}
}

// The condition keys of istiod's authorization model.
const (
	attrRequestHeader     = "request.headers"
	attrSrcIP             = "source.ip"
	attrRemoteIP          = "remote.ip"
	attrSrcNamespace      = "source.namespace"
	attrSrcServiceAccount = "source.serviceAccount"
	attrSrcTrustDomain    = "source.trustDomain"
	attrSrcPrincipal      = "source.principal"
	attrRequestPrincipal  = "request.auth.principal"
	attrRequestAudiences  = "request.auth.audiences"
	attrRequestPresenter  = "request.auth.presenter"
	attrRequestClaims     = "request.auth.claims"
	attrDestIP            = "destination.ip"
	attrDestPort          = "destination.port"
	attrConnSNI           = "connection.sni"
	attrExperimental      = "experimental.envoy.filters."
)

// convertRule converts one rule, recording in st what gRPC servers do
// not enforce as written; a refusal names the field.
func convertRule(rule *securityapi.Rule, path string, action model.AuthzAction, st *configstatus.Status) (model.AuthzRule, *configstatus.Field) {
	var out model.AuthzRule
	refuse := func(p, why string) (model.AuthzRule, *configstatus.Field) {
		return model.AuthzRule{}, &configstatus.Field{Path: p, Why: why}
	}
	if rule == nil {
		return refuse(path, "a rule must not be null")
	}
	jwt := func(p string, negated bool) {
		switch {
		case action == model.AuthzAllow && !negated:
			st.IgnoreGRPC(p, whyJWTAllow)
		case action == model.AuthzAllow:
			st.IgnoreGRPC(p, whyNotJWTAllow)
		case action == model.AuthzDeny && !negated:
			st.IgnoreGRPC(p, whyJWTDeny)
		case action == model.AuthzDeny:
			st.IgnoreGRPC(p, whyNotJWTDeny)
		}
	}
	if rule.From != nil && len(rule.From) == 0 {
		return refuse(path+".from", "from must not be an empty list: leave it out to match every caller")
	}
	for j, from := range rule.GetFrom() {
		p := fmt.Sprintf("%s.from[%d].source", path, j)
		src := from.GetSource()
		if src == nil {
			return refuse(p, "a from entry needs a source")
		}
		s := model.AuthzSource{
			Principals: src.GetPrincipals(), NotPrincipals: src.GetNotPrincipals(),
			RequestPrincipals: src.GetRequestPrincipals(), NotRequestPrincipals: src.GetNotRequestPrincipals(),
			Namespaces: src.GetNamespaces(), NotNamespaces: src.GetNotNamespaces(),
			IPBlocks: src.GetIpBlocks(), NotIPBlocks: src.GetNotIpBlocks(),
			RemoteIPBlocks: src.GetRemoteIpBlocks(), NotRemoteIPBlocks: src.GetNotRemoteIpBlocks(),
			ServiceAccounts: src.GetServiceAccounts(), NotServiceAccounts: src.GetNotServiceAccounts(),
			TrustDomains: src.GetTrustDomains(), NotTrustDomains: src.GetNotTrustDomains(),
		}
		if len(s.Principals)+len(s.NotPrincipals)+len(s.Namespaces)+len(s.NotNamespaces) > 0 && len(s.ServiceAccounts)+len(s.NotServiceAccounts) > 0 {
			return refuse(p+".serviceAccounts", "serviceAccounts cannot be set with namespaces or principals")
		}
		lists := []checkedList{
			{"principals", s.Principals, nil}, {"notPrincipals", s.NotPrincipals, nil},
			{"requestPrincipals", s.RequestPrincipals, nil}, {"notRequestPrincipals", s.NotRequestPrincipals, nil},
			{"namespaces", s.Namespaces, nil}, {"notNamespaces", s.NotNamespaces, nil},
			{"ipBlocks", s.IPBlocks, checkIPs}, {"notIpBlocks", s.NotIPBlocks, checkIPs},
			{"remoteIpBlocks", s.RemoteIPBlocks, checkIPs}, {"notRemoteIpBlocks", s.NotRemoteIPBlocks, checkIPs},
			{"serviceAccounts", s.ServiceAccounts, checkServiceAccounts}, {"notServiceAccounts", s.NotServiceAccounts, checkServiceAccounts},
			{"trustDomains", s.TrustDomains, checkTrustDomains}, {"notTrustDomains", s.NotTrustDomains, checkTrustDomains},
		}
		set, field, why := checkLists(lists)
		if why != "" {
			return refuse(p+"."+field, why)
		}
		if !set {
			return refuse(p, "a source must set at least one field: leave the from entry out to match every caller")
		}
		if len(s.RequestPrincipals) > 0 {
			jwt(p+".requestPrincipals", false)
		}
		if len(s.NotRequestPrincipals) > 0 {
			jwt(p+".notRequestPrincipals", true)
		}
		if len(s.RemoteIPBlocks) > 0 {
			st.IgnoreGRPC(p+".remoteIpBlocks", whyRemoteIP)
		}
		if len(s.NotRemoteIPBlocks) > 0 {
			st.IgnoreGRPC(p+".notRemoteIpBlocks", whyRemoteIP)
		}
		out.From = append(out.From, s)
	}
	if rule.To != nil && len(rule.To) == 0 {
		return refuse(path+".to", "to must not be an empty list: leave it out to match every call")
	}
	for j, to := range rule.GetTo() {
		p := fmt.Sprintf("%s.to[%d].operation", path, j)
		op := to.GetOperation()
		if op == nil {
			return refuse(p, "a to entry needs an operation")
		}
		o := model.AuthzOperation{
			Hosts: op.GetHosts(), NotHosts: op.GetNotHosts(), Ports: op.GetPorts(), NotPorts: op.GetNotPorts(),
			Methods: op.GetMethods(), NotMethods: op.GetNotMethods(), Paths: op.GetPaths(), NotPaths: op.GetNotPaths(),
		}
		lists := []checkedList{
			{"hosts", o.Hosts, nil}, {"notHosts", o.NotHosts, nil},
			{"ports", o.Ports, checkPorts}, {"notPorts", o.NotPorts, checkPorts},
			{"methods", o.Methods, nil}, {"notMethods", o.NotMethods, nil},
			{"paths", o.Paths, checkPathTemplates}, {"notPaths", o.NotPaths, checkPathTemplates},
		}
		set, field, why := checkLists(lists)
		if why != "" {
			return refuse(p+"."+field, why)
		}
		if !set {
			// An empty list (paths: []) is no field: istiod refuses an
			// operation that sets nothing else.
			return refuse(p, "an operation must set at least one field: leave the to entry out to match every call")
		}
		out.To = append(out.To, o)
	}
	for j, when := range rule.GetWhen() {
		p := fmt.Sprintf("%s.when[%d]", path, j)
		if when == nil {
			return refuse(p, "a condition must not be null")
		}
		key := when.GetKey()
		if key == "" {
			return refuse(p+".key", "a condition needs a key")
		}
		if len(when.GetValues()) == 0 && len(when.GetNotValues()) == 0 {
			return refuse(p, "a condition needs values or notValues")
		}
		if why := checkAttribute(key, when.GetValues()); why != "" {
			return refuse(p+".values", why)
		}
		if why := checkAttribute(key, when.GetNotValues()); why != "" {
			return refuse(p+".notValues", why)
		}
		if strings.HasPrefix(key, "request.auth.") || strings.HasPrefix(key, attrExperimental) {
			if len(when.GetValues()) > 0 {
				jwt(p+".values", false)
			}
			if len(when.GetNotValues()) > 0 {
				jwt(p+".notValues", true)
			}
		}
		if key == attrRemoteIP {
			st.IgnoreGRPC(p+".key", whyRemoteIP)
		}
		out.When = append(out.When, model.AuthzCondition{Key: key, Values: when.GetValues(), NotValues: when.GetNotValues()})
	}
	return out, nil
}

// checkedList is one list field of a source or an operation and the
// check of its values (nil: only that none is empty).
type checkedList struct {
	name  string
	v     []string
	check func([]string) string
}

// checkLists checks every list that is set; set reports whether one is,
// and field and why name the first refused and the reason.
func checkLists(lists []checkedList) (set bool, field, why string) {
	for _, l := range lists {
		if len(l.v) == 0 {
			continue
		}
		set = true
		if why := checkValues(l.v, l.check); why != "" {
			return true, l.name, why
		}
	}
	return set, "", ""
}

// checkValues refuses an empty value, then what check refuses.
func checkValues(values []string, check func([]string) string) string {
	for _, v := range values {
		if v == "" {
			return "a value must not be empty"
		}
	}
	if check != nil {
		return check(values)
	}
	return ""
}

// checkAttribute checks a condition's key and values as istiod's
// ValidateAttribute does.
func checkAttribute(key string, values []string) string {
	if why := checkValues(values, nil); why != "" {
		return why
	}
	switch {
	case strings.HasPrefix(key, attrRequestHeader), strings.HasPrefix(key, attrRequestClaims), strings.HasPrefix(key, attrExperimental):
		return checkMapKey(key)
	case key == attrSrcIP, key == attrRemoteIP, key == attrDestIP:
		return checkIPs(values)
	case key == attrSrcServiceAccount:
		return checkServiceAccounts(values)
	case key == attrSrcTrustDomain:
		return checkWildcards(values)
	case key == attrDestPort:
		return checkPorts(values)
	case key == attrSrcNamespace, key == attrSrcPrincipal, key == attrRequestPrincipal, key == attrRequestAudiences,
		key == attrRequestPresenter, key == attrConnSNI:
		return ""
	}
	return fmt.Sprintf("unknown condition key %q", key)
}

func checkMapKey(key string) string {
	open := strings.Index(key, "[")
	if strings.HasSuffix(key, "]") && open > 0 && open < len(key)-2 {
		return ""
	}
	return fmt.Sprintf("key %q must have the form a[b]", key)
}

func checkIPs(values []string) string {
	for _, v := range values {
		if strings.Contains(v, "/") {
			if _, err := netip.ParsePrefix(v); err != nil {
				return fmt.Sprintf("%q is not a CIDR range: %v", v, err)
			}
		} else if _, err := netip.ParseAddr(v); err != nil {
			return fmt.Sprintf("%q is not an IP address", v)
		}
	}
	return ""
}

func checkPorts(values []string) string {
	for _, v := range values {
		if p, err := strconv.ParseUint(v, 10, 32); err != nil || p > 65535 {
			return fmt.Sprintf("%q is not a port number (0 to 65535)", v)
		}
	}
	return ""
}

func checkServiceAccounts(values []string) string {
	if len(values) > 16 {
		return "at most 16 service accounts"
	}
	for _, v := range values {
		ns, sa, found := strings.Cut(v, "/")
		switch {
		case strings.Contains(v, "*"):
			return fmt.Sprintf("%q: a service account has no wildcard", v)
		case len(v) > 320:
			return fmt.Sprintf("%q is longer than 320 characters", v)
		case strings.Count(v, "/") > 1, found && (ns == "" || sa == ""):
			return fmt.Sprintf("%q: expected serviceAccount or namespace/serviceAccount", v)
		}
	}
	return ""
}

func checkWildcards(values []string) string {
	for _, v := range values {
		n := strings.Count(v, "*")
		if n > 1 || n == 1 && v != "*" && !strings.HasPrefix(v, "*") && !strings.HasSuffix(v, "*") {
			return fmt.Sprintf("%q: one wildcard at most, at the start or the end", v)
		}
	}
	return ""
}

func checkTrustDomains(values []string) string {
	if why := checkWildcards(values); why != "" {
		return why
	}
	for _, v := range values {
		if strings.Contains(v, "/") {
			return fmt.Sprintf("%q: a trust domain has no '/'", v)
		}
	}
	return ""
}

// validPathLiteral is a segment of a path template: RFC 3986's pchar.
var validPathLiteral = regexp.MustCompile("^[a-zA-Z0-9-._~%!$&'()+,;:@=]+$")

// checkPathTemplates refuses paths whose {*} and {**} templates istiod
// refuses: {**} not last, braces elsewhere, or a segment of a template
// path that is not a URL path character.
func checkPathTemplates(paths []string) string {
	for _, path := range paths {
		template := strings.Contains(path, "{*}") || strings.Contains(path, "{**}")
		sawAny := false
		for _, glob := range strings.Split(strings.Trim(path, "/"), "/") {
			switch {
			case (glob == "{*}" || glob == "{**}") && sawAny:
				return fmt.Sprintf("%q: {**} must be the last template", path)
			case glob == "{**}":
				sawAny = true
				continue
			case glob == "{*}":
				continue
			case strings.ContainsAny(glob, "{}"):
				return fmt.Sprintf("%q: '{' and '}' only as {*} or {**}", path)
			case template && !validPathLiteral.MatchString(glob):
				return fmt.Sprintf("%q: segment %q is not a valid path literal", path, glob)
			}
		}
	}
	return ""
}
