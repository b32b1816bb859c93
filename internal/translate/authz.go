package translate

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshpilot/meshpilot/internal/model"
)

// A gRPC server enforces AuthorizationPolicies through the RBAC HTTP
// filters of its inbound listener (gRFC A41), which grpc-go runs before
// the router: the DENY filter first, then the ALLOW filter, as istiod's
// grpcgen orders and names them. An RPC is refused when it matches a
// policy of the DENY filter, or when an ALLOW filter is present and it
// matches none of its policies: Istio's evaluation order (any DENY match
// denies; with an ALLOW policy present, only a match allows).
//
// Each rule of a policy becomes one RBAC policy "<ns>-<name>-<index>",
// its permissions the rule's to (OR), each the AND of its operation's
// fields and the when conditions on the call; its principals the rule's
// from (OR), each the AND of its source's fields and the when conditions
// on the caller. Fields are matched as Istio's authorization model
// writes them for an HTTP filter with authenticated principals (istiod's
// Generate with useAuthenticated): principals and namespaces against the
// peer certificate's URI SAN, paths against the gRPC method
// ("/package.Service/Method"), hosts against :authority, ports against
// the server's port.
//
// What grpc-go cannot evaluate fails closed, by the rule istiod applies
// to its Envoy filters when a field cannot be expressed: a rule of an
// ALLOW policy that needs it matches nothing, and a DENY rule is built
// without that condition, so it denies more. That covers request
// principals, request.auth.* and JWT claims (grpc-go has no JWT
// authentication: it never matches metadata), connection.sni (grpc-go
// matches the requested server name against "", A41), path templates,
// Envoy filter metadata, and headers grpc-go refuses to match (grpc-*,
// :scheme, which would make it NACK the listener). istiod's grpcgen
// writes some of these as metadata matchers, which grpc-go never matches,
// so its DENY rules using them deny nothing; meshpilot denies more
// instead.
//
// Where meshpilot deliberately differs from istiod's grpcgen:
//   - an ALLOW policy with no rules is served as an ALLOW filter without
//     policies, which denies every call, as Istio's API says and istiod
//     does for Envoy; grpcgen leaves the empty filter out, allowing all;
//   - a CUSTOM policy, whose external authorizer a gRPC server cannot
//     call, is served as a DENY: the calls it would send to the
//     authorizer are refused. grpcgen ignores CUSTOM policies;
//   - principals and source.principal values are expanded to the mesh's
//     trust domain aliases, as istiod does for Envoy (grpcgen does not);
//   - under mutual TLS the DENY filter also refuses a peer whose
//     certificate is not of the mesh's trust domain or an alias
//     (trustDomainPolicy).
//
// AUDIT policies are not served, as grpcgen serves none: grpc-go ignores
// an RBAC filter whose action is LOG (A41), and has no audit sink an
// Istio AUDIT policy could name.

// The RBAC filters' names, istiod's for gRPC servers.
const (
	rbacFilterAllow = "envoy.filters.http.rbac"
	rbacFilterDeny  = "envoy.filters.http.rbac.DENY"
)

// trustDomainPolicy names the DENY filter's policy that refuses a peer of
// another trust domain. A policy built from a rule is called
// "<ns>-<name>-<index>" and so always ends in a digit: this name cannot
// collide with one.
const trustDomainPolicy = "mesh-trust-domain"

// rbacFilters builds a gRPC server's RBAC filters, to go before the
// router, from the authorization policies that apply to it (in Istio's
// order, oldest first) and, when requireTrustDomain is set, the check of
// the peer's trust domain; nil when nothing is enforced.
func rbacFilters(policies []*model.AuthorizationPolicy, mesh *model.MeshSettings, requireTrustDomain bool) []*hcm.HttpFilter {
	trustDomains := meshTrustDomains(mesh)
	deny := &rbac.RBAC{Action: rbac.RBAC_DENY, Policies: map[string]*rbac.Policy{}}
	var allow *rbac.RBAC
	for _, p := range policies {
		action := rbac.RBAC_DENY
		switch p.Action {
		case model.AuthzAudit:
			continue
		case model.AuthzAllow:
			action = rbac.RBAC_ALLOW
			if allow == nil {
				allow = &rbac.RBAC{Action: rbac.RBAC_ALLOW, Policies: map[string]*rbac.Policy{}}
			}
		}
		for i, r := range p.Rules {
			b := ruleBuilder{policyNS: p.Namespace, deny: action == rbac.RBAC_DENY, trustDomains: trustDomains}
			pol, ok := b.policy(r)
			if !ok {
				continue // an ALLOW rule grpc-go cannot evaluate matches nothing
			}
			name := p.Namespace + "-" + p.Name + "-" + strconv.Itoa(i)
			if action == rbac.RBAC_ALLOW {
				allow.Policies[name] = pol
			} else {
				deny.Policies[name] = pol
			}
		}
	}
	if requireTrustDomain {
		deny.Policies[trustDomainPolicy] = &rbac.Policy{
			Permissions: []*rbac.Permission{permissionAny()},
			Principals:  []*rbac.Principal{principalNot(principalOr(trustDomainPrincipals(trustDomains)))},
		}
	}
	var out []*hcm.HttpFilter
	if len(deny.Policies) > 0 {
		out = append(out, rbacFilter(rbacFilterDeny, deny))
	}
	if allow != nil {
		out = append(out, rbacFilter(rbacFilterAllow, allow))
	}
	return out
}

// meshTrustDomains are the mesh's trust domain and its aliases, in order,
// without duplicates.
func meshTrustDomains(mesh *model.MeshSettings) []string {
	tds := []string{cmp.Or(mesh.TrustDomain, model.DefaultTrustDomain)}
	for _, a := range mesh.TrustDomainAliases {
		if a != "" && !slices.Contains(tds, a) {
			tds = append(tds, a)
		}
	}
	return tds
}

// trustDomainPrincipals match a peer certificate of one of the trust
// domains.
func trustDomainPrincipals(tds []string) []*rbac.Principal {
	out := make([]*rbac.Principal, 0, len(tds))
	for _, td := range tds {
		out = append(out, principalAuthenticated(prefixMatcher("spiffe://"+td+"/")))
	}
	return out
}

func rbacFilter(name string, rules *rbac.RBAC) *hcm.HttpFilter {
	a, err := anypb.New(&rbachttp.RBAC{Rules: rules})
	if err != nil {
		panic(err) // marshalling a well-formed message cannot fail
	}
	return &hcm.HttpFilter{Name: name, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: a}}
}

// ruleBuilder turns one rule of a policy into an RBAC policy.
type ruleBuilder struct {
	policyNS string
	// deny: the rule denies (DENY or CUSTOM), so a condition grpc-go
	// cannot evaluate is left out; otherwise it voids the rule.
	deny         bool
	trustDomains []string
	// report, when set, is told each field grpc-go cannot evaluate, by
	// its path in the rule ("from[0].source.requestPrincipals").
	report func(field string, err error)
}

func (b ruleBuilder) unsupported(field string, err error) {
	if b.report != nil {
		b.report(field, err)
	}
}

// errUnsupported marks what grpc-go cannot evaluate.
type errUnsupported struct{ what string }

func (e errUnsupported) Error() string { return e.what + " cannot be evaluated by a gRPC server" }

// policy builds the rule's policy; ok is false when the rule is of an
// ALLOW policy and uses what grpc-go cannot evaluate.
func (b ruleBuilder) policy(r model.AuthzRule) (*rbac.Policy, bool) {
	var basePerms []*rbac.Permission
	var basePrins []*rbac.Principal
	for k, w := range r.When {
		perms, prins, err := b.when(w)
		if err != nil {
			b.unsupported("when["+strconv.Itoa(k)+"]", err)
			if !b.deny {
				return nil, false
			}
			continue
		}
		basePerms = append(basePerms, perms...)
		basePrins = append(basePrins, prins...)
	}
	pol := &rbac.Policy{}
	tos := r.To
	if len(tos) == 0 {
		tos = []model.AuthzOperation{{}}
	}
	for j, to := range tos {
		and, ok := b.operation(to, "to["+strconv.Itoa(j)+"].operation.")
		if !ok {
			return nil, false
		}
		and = append(and, basePerms...)
		if len(and) == 0 {
			and = append(and, permissionAny())
		}
		pol.Permissions = append(pol.Permissions, &rbac.Permission{Rule: &rbac.Permission_AndRules{AndRules: &rbac.Permission_Set{Rules: and}}})
	}
	froms := r.From
	if len(froms) == 0 {
		froms = []model.AuthzSource{{}}
	}
	for j, from := range froms {
		and, ok := b.source(from, "from["+strconv.Itoa(j)+"].source.")
		if !ok {
			return nil, false
		}
		and = append(and, basePrins...)
		if len(and) == 0 {
			and = append(and, principalAny())
		}
		pol.Principals = append(pol.Principals, &rbac.Principal{Identifier: &rbac.Principal_AndIds{AndIds: &rbac.Principal_Set{Ids: and}}})
	}
	return pol, true
}

// condition builds one field's matchers: one of values (OR), none of
// notValues (NOT OR). An error voids an ALLOW rule; a DENY rule is built
// without the field.
func condition[M any](values, notValues []string, one func(string) (M, error), or func([]M) M, not func(M) M) ([]M, error) {
	var out []M
	for i, vs := range [][]string{values, notValues} {
		if len(vs) == 0 {
			continue
		}
		ms := make([]M, 0, len(vs))
		for _, v := range vs {
			m, err := one(v)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		m := or(ms)
		if i == 1 {
			m = not(m)
		}
		out = append(out, m)
	}
	return out, nil
}

// operation builds the AND of an operation's fields, in the order
// istiod writes them (hosts, methods, paths, ports); ok is false when it
// voids the rule.
func (b ruleBuilder) operation(o model.AuthzOperation, path string) ([]*rbac.Permission, bool) {
	var and []*rbac.Permission
	for _, f := range []struct {
		field       string
		values, not []string
		one         func(string) (*rbac.Permission, error)
	}{
		{"hosts", o.Hosts, o.NotHosts, hostPermission},
		{"methods", o.Methods, o.NotMethods, methodPermission},
		{"paths", o.Paths, o.NotPaths, pathPermission},
		{"ports", o.Ports, o.NotPorts, portPermission},
	} {
		ms, err := condition(f.values, f.not, f.one, permissionOr, permissionNot)
		if err != nil {
			b.unsupported(path+f.field, err)
			if !b.deny {
				return nil, false
			}
			continue
		}
		and = append(and, ms...)
	}
	return and, true
}

// source builds the AND of a source's fields, in the order istiod writes
// them; ok is false when it voids the rule.
func (b ruleBuilder) source(s model.AuthzSource, path string) ([]*rbac.Principal, bool) {
	var and []*rbac.Principal
	for _, f := range []struct {
		field       string
		values, not []string
		one         func(string) (*rbac.Principal, error)
	}{
		{"principals", b.expandPrincipals(s.Principals), b.expandPrincipals(s.NotPrincipals), principalPrincipal},
		{"requestPrincipals", s.RequestPrincipals, s.NotRequestPrincipals, unsupportedPrincipal("requestPrincipals")},
		{"namespaces", s.Namespaces, s.NotNamespaces, namespacePrincipal},
		{"remoteIpBlocks", s.RemoteIPBlocks, s.NotRemoteIPBlocks, remoteIPPrincipal},
		{"ipBlocks", s.IPBlocks, s.NotIPBlocks, directRemoteIPPrincipal},
		{"serviceAccounts", s.ServiceAccounts, s.NotServiceAccounts, func(v string) (*rbac.Principal, error) {
			return principalAuthenticated(regexMatcher(serviceAccountRegex(b.policyNS, v))), nil
		}},
		{"trustDomains", b.expandTrustDomains(s.TrustDomains), b.expandTrustDomains(s.NotTrustDomains), trustDomainPrincipal},
	} {
		ms, err := condition(f.values, f.not, f.one, principalOr, principalNot)
		if err != nil {
			b.unsupported(path+f.field, err)
			if !b.deny {
				return nil, false
			}
			continue
		}
		and = append(and, ms...)
	}
	return and, true
}

// when builds a when condition, as a permission (what the call is for)
// or a principal (who calls), as Istio's model sorts them.
func (b ruleBuilder) when(w model.AuthzCondition) ([]*rbac.Permission, []*rbac.Principal, error) {
	perm := func(one func(string) (*rbac.Permission, error)) ([]*rbac.Permission, []*rbac.Principal, error) {
		ms, err := condition(w.Values, w.NotValues, one, permissionOr, permissionNot)
		return ms, nil, err
	}
	prin := func(values, notValues []string, one func(string) (*rbac.Principal, error)) ([]*rbac.Permission, []*rbac.Principal, error) {
		ms, err := condition(values, notValues, one, principalOr, principalNot)
		return nil, ms, err
	}
	k := w.Key
	switch {
	case k == "destination.ip":
		return perm(destinationIPPermission)
	case k == "destination.port":
		return perm(portPermission)
	case k == "source.ip":
		return prin(w.Values, w.NotValues, directRemoteIPPrincipal)
	case k == "remote.ip":
		return prin(w.Values, w.NotValues, remoteIPPrincipal)
	case k == "source.namespace":
		return prin(w.Values, w.NotValues, namespacePrincipal)
	case k == "source.principal":
		return prin(b.expandPrincipals(w.Values), b.expandPrincipals(w.NotValues), principalPrincipal)
	case k == "source.serviceAccount":
		return prin(w.Values, w.NotValues, func(v string) (*rbac.Principal, error) {
			return principalAuthenticated(regexMatcher(serviceAccountRegex(b.policyNS, v))), nil
		})
	case k == "source.trustDomain":
		return prin(b.expandTrustDomains(w.Values), b.expandTrustDomains(w.NotValues), trustDomainPrincipal)
	case strings.HasPrefix(k, "request.headers"):
		name, ok := strings.CutPrefix(k, "request.headers[")
		name, ok2 := strings.CutSuffix(name, "]")
		if !ok || !ok2 || name == "" {
			return nil, nil, errUnsupported{k}
		}
		return prin(w.Values, w.NotValues, func(v string) (*rbac.Principal, error) {
			h, err := headerMatcher(name, v, false)
			if err != nil {
				return nil, err
			}
			return &rbac.Principal{Identifier: &rbac.Principal_Header{Header: h}}, nil
		})
	}
	// connection.sni, request.auth.*, experimental.envoy.filters.* and
	// what Istio does not know.
	return nil, nil, errUnsupported{k}
}

// expandPrincipals adds, for a principal of the mesh's trust domain or an
// alias (or of "cluster.local", which Istio reads as the mesh's), its
// form in each of them, as istiod's trust domain migration does.
func (b ruleBuilder) expandPrincipals(ps []string) []string {
	if len(b.trustDomains) < 2 && (len(b.trustDomains) == 0 || b.trustDomains[0] == model.DefaultTrustDomain) {
		return ps // nothing to replace
	}
	var out []string
	for _, p := range ps {
		parts := strings.Split(p, "/")
		if len(parts) != 5 || parts[0] == "*" || (!slices.ContainsFunc(b.trustDomains, func(td string) bool { return trustDomainMatches(td, parts[0]) }) && parts[0] != model.DefaultTrustDomain) {
			out = appendNew(out, p)
			continue
		}
		for _, td := range b.trustDomains {
			if trustDomainMatches(td, parts[0]) {
				out = appendNew(out, p)
			} else {
				out = appendNew(out, td+"/"+strings.Join(parts[1:], "/"))
			}
		}
	}
	return out
}

// trustDomainMatches reports whether trust domain td is what pattern
// names: itself, or "*<suffix>".
func trustDomainMatches(td, pattern string) bool {
	if s, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(td, s)
	}
	return td == pattern
}

// expandTrustDomains replaces a trust domain of the mesh by all of them.
func (b ruleBuilder) expandTrustDomains(vs []string) []string {
	var out []string
	for _, v := range vs {
		if slices.Contains(b.trustDomains, v) {
			for _, td := range b.trustDomains {
				out = appendNew(out, td)
			}
			continue
		}
		out = appendNew(out, v)
	}
	return out
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func unsupportedPrincipal(what string) func(string) (*rbac.Principal, error) {
	return func(string) (*rbac.Principal, error) { return nil, errUnsupported{what} }
}

// principalPrincipal matches a peer identity "<td>/ns/<ns>/sa/<sa>" (with
// Istio's "*" prefix, suffix and presence forms) against the URI SAN of
// its certificate.
func principalPrincipal(v string) (*rbac.Principal, error) {
	return principalAuthenticated(istioStringMatcher(v, "spiffe://")), nil
}

// namespacePrincipal matches a peer of namespace v ("*" a wildcard in
// it), as Istio's regex on the SPIFFE identity does.
func namespacePrincipal(v string) (*rbac.Principal, error) {
	parts := strings.Split(v, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return principalAuthenticated(regexMatcher(".*/ns/" + strings.Join(parts, ".*") + "/.*")), nil
}

// serviceAccountRegex matches a SPIFFE identity of service account v,
// "<name>" of the policy's namespace or "<namespace>/<name>", as Istio
// writes it.
func serviceAccountRegex(policyNS, v string) string {
	ns, sa, ok := strings.Cut(v, "/")
	if !ok {
		ns, sa = policyNS, v
	}
	return "spiffe://.+/ns/" + regexp.QuoteMeta(ns) + "/(.+/|)sa/" + regexp.QuoteMeta(sa) + "(/.+)?"
}

func trustDomainPrincipal(v string) (*rbac.Principal, error) {
	switch {
	case v == "*":
		return principalAuthenticated(prefixMatcher("spiffe://")), nil
	case !strings.Contains(v, "*"):
		return principalAuthenticated(prefixMatcher("spiffe://" + v + "/")), nil
	}
	parts := strings.SplitN(v, "*", 2)
	return principalAuthenticated(regexMatcher("spiffe://" + regexp.QuoteMeta(parts[0]) + "[^/]*" + regexp.QuoteMeta(parts[1]) + "/.*")), nil
}

func directRemoteIPPrincipal(v string) (*rbac.Principal, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbac.Principal{Identifier: &rbac.Principal_DirectRemoteIp{DirectRemoteIp: c}}, nil
}

// remoteIPPrincipal is remoteIpBlocks: grpc-go has no proxy protocol nor
// x-forwarded-for and reads it as the peer's address (A41), as Envoy
// does without them.
func remoteIPPrincipal(v string) (*rbac.Principal, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbac.Principal{Identifier: &rbac.Principal_RemoteIp{RemoteIp: c}}, nil
}

func destinationIPPermission(v string) (*rbac.Permission, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbac.Permission{Rule: &rbac.Permission_DestinationIp{DestinationIp: c}}, nil
}

// cidrRange reads an address or a CIDR block.
func cidrRange(v string) (*core.CidrRange, error) {
	var p netip.Prefix
	if strings.Contains(v, "/") {
		var err error
		if p, err = netip.ParsePrefix(v); err != nil {
			return nil, err
		}
	} else {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, err
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return &core.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))}, nil
}

// hostPermission matches :authority, ignoring case, as Istio does.
func hostPermission(v string) (*rbac.Permission, error) {
	h, err := headerMatcher(":authority", v, true)
	if err != nil {
		return nil, err
	}
	return &rbac.Permission{Rule: &rbac.Permission_Header{Header: h}}, nil
}

// methodPermission matches :method, which grpc-go sets to POST (A41).
func methodPermission(v string) (*rbac.Permission, error) {
	h, err := headerMatcher(":method", v, false)
	if err != nil {
		return nil, err
	}
	return &rbac.Permission{Rule: &rbac.Permission_Header{Header: h}}, nil
}

// pathPermission matches the gRPC method, "/package.Service/Method". A
// path template ("{*}", "{**}") is an Envoy extension grpc-go does not
// know: it would NACK the listener.
func pathPermission(v string) (*rbac.Permission, error) {
	if strings.Contains(v, "{*}") || strings.Contains(v, "{**}") {
		return nil, errUnsupported{"path template " + v}
	}
	return &rbac.Permission{Rule: &rbac.Permission_UrlPath{UrlPath: &matcher.PathMatcher{
		Rule: &matcher.PathMatcher_Path{Path: istioStringMatcher(v, "")},
	}}}, nil
}

// portPermission matches the port the server listens on.
func portPermission(v string) (*rbac.Permission, error) {
	p, err := strconv.ParseUint(v, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", v, err)
	}
	return &rbac.Permission{Rule: &rbac.Permission_DestinationPort{DestinationPort: uint32(p)}}, nil
}

// headerMatcher is Istio's matcher of a header value: "*" presence,
// "*<suffix>", "<prefix>*", else exact. grpc-go refuses a matcher of a
// grpc-* header or :scheme (the listener would be NACKed).
func headerMatcher(name, v string, ignoreCase bool) (*route.HeaderMatcher, error) {
	lower := strings.ToLower(name)
	if lower == ":scheme" || strings.HasPrefix(lower, "grpc-") {
		return nil, errUnsupported{"header " + name}
	}
	h := &route.HeaderMatcher{Name: name}
	switch {
	case v == "*":
		h.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
	case strings.HasPrefix(v, "*"):
		h.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
			MatchPattern: &matcher.StringMatcher_Suffix{Suffix: v[1:]}, IgnoreCase: ignoreCase}}
	case strings.HasSuffix(v, "*"):
		h.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
			MatchPattern: &matcher.StringMatcher_Prefix{Prefix: v[:len(v)-1]}, IgnoreCase: ignoreCase}}
	default:
		h.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
			MatchPattern: &matcher.StringMatcher_Exact{Exact: v}, IgnoreCase: ignoreCase}}
	}
	return h, nil
}

// istioStringMatcher is Istio's string match of v with prefix before it:
// "*" any non-empty string (prefix ignored), "*<suffix>", "<prefix>*",
// else exact.
func istioStringMatcher(v, prefix string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return regexMatcher(".+")
	case strings.HasPrefix(v, "*"):
		if prefix == "" {
			return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: v[1:]}}
		}
		return regexMatcher(regexp.QuoteMeta(prefix) + ".*" + regexp.QuoteMeta(v[1:]))
	case strings.HasSuffix(v, "*"):
		return prefixMatcher(prefix + v[:len(v)-1])
	}
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: prefix + v}}
}

func regexMatcher(re string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: re}}}
}

func prefixMatcher(p string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: p}}
}

func principalAuthenticated(m *matcher.StringMatcher) *rbac.Principal {
	return &rbac.Principal{Identifier: &rbac.Principal_Authenticated_{Authenticated: &rbac.Principal_Authenticated{PrincipalName: m}}}
}

func principalAny() *rbac.Principal {
	return &rbac.Principal{Identifier: &rbac.Principal_Any{Any: true}}
}

func principalOr(ps []*rbac.Principal) *rbac.Principal {
	return &rbac.Principal{Identifier: &rbac.Principal_OrIds{OrIds: &rbac.Principal_Set{Ids: ps}}}
}

func principalNot(p *rbac.Principal) *rbac.Principal {
	return &rbac.Principal{Identifier: &rbac.Principal_NotId{NotId: p}}
}

func permissionAny() *rbac.Permission { return &rbac.Permission{Rule: &rbac.Permission_Any{Any: true}} }

func permissionOr(ps []*rbac.Permission) *rbac.Permission {
	return &rbac.Permission{Rule: &rbac.Permission_OrRules{OrRules: &rbac.Permission_Set{Rules: ps}}}
}

func permissionNot(p *rbac.Permission) *rbac.Permission {
	return &rbac.Permission{Rule: &rbac.Permission_NotRule{NotRule: p}}
}
