package translate

import (
	"strconv"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/model"
)

// AuthorizationGRPCIgnored lists what of an AuthorizationPolicy gRPC
// servers do not enforce as written, and what they enforce instead: the
// policy's ignoredForGRPC on /debug/configz, which whoever converts the
// policy reports. It follows rbacFilters' rules, so the report and the
// listeners cannot disagree.
func AuthorizationGRPCIgnored(p *model.AuthorizationPolicy) []configstatus.Field {
	var out []configstatus.Field
	switch p.Action {
	case model.AuthzAudit:
		return []configstatus.Field{{Path: "spec.action",
			Why: "AUDIT is not served to gRPC servers: grpc-go ignores an RBAC filter whose action is LOG and has no audit sink (istiod's gRPC generator serves none either)"}}
	case model.AuthzCustom:
		out = append(out, configstatus.Field{Path: "spec.action",
			Why: "CUSTOM: a gRPC server cannot call the external authorizer, so the calls the rules match are denied (istiod's gRPC generator ignores the policy)"})
	}
	outcome := ": the rule is enforced without it, so it denies more"
	if p.Action == model.AuthzAllow {
		outcome = ": the rule allows nothing"
	}
	for i, r := range p.Rules {
		// Built as a deny rule, which goes on past what it cannot
		// evaluate, so that every such field is listed.
		b := ruleBuilder{policyNS: p.Namespace, deny: true, report: func(field string, err error) {
			out = append(out, configstatus.Field{Path: "spec.rules[" + strconv.Itoa(i) + "]." + field, Why: err.Error() + outcome})
		}}
		b.policy(r)
	}
	return out
}
