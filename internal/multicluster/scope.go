package multicluster

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of a remote Secret that narrow or widen what its clusters'
// registries watch, in place of serve's --namespaces and
// --discovery-selectors (Options.Scope): a big remote cluster of which the
// mesh needs a few namespaces need not be listed whole.
const (
	// AnnotationNamespaces takes what --namespaces takes: namespace names
	// separated by commas; empty means every namespace.
	AnnotationNamespaces = "meshpilot.io/namespaces"
	// AnnotationDiscoverySelectors takes what --discovery-selectors takes,
	// one selector per line (the flag is repeated, and a selector holds
	// commas: "env=prod,team in (a,b)"); empty means none. MeshConfig's
	// discoverySelectors still apply beside them, as they do beside the
	// flag's.
	AnnotationDiscoverySelectors = "meshpilot.io/discovery-selectors"
)

// Scope is what a cluster's registry watches: serve's --namespaces and
// --discovery-selectors, or a remote Secret's annotations in their place.
type Scope struct {
	// Namespaces limits every list and watch to these; none means all.
	Namespaces []string
	// DiscoverySelectors are namespace label selectors in label selector
	// syntax; a namespace matching any is watched.
	DiscoverySelectors []string
}

// String identifies the scope in logs and in the sum that tells whether
// a cluster's registry must be rebuilt.
func (s Scope) String() string {
	return fmt.Sprintf("namespaces=%q discoverySelectors=%q", s.Namespaces, s.DiscoverySelectors)
}

// annotationError names the annotation that was refused and why.
type annotationError struct {
	annotation string
	err        error
}

func (e *annotationError) Error() string { return e.annotation + ": " + e.err.Error() }
func (e *annotationError) Unwrap() error { return e.err }

// scopeOf returns the scope of a Secret's clusters: def, with each part
// that the Secret annotates replaced. A value that --namespaces or
// --discovery-selectors would not take is an *annotationError.
func scopeOf(annotations map[string]string, def Scope) (Scope, error) {
	out := def
	if v, ok := annotations[AnnotationNamespaces]; ok {
		ns, err := parseNamespaces(v)
		if err != nil {
			return Scope{}, &annotationError{AnnotationNamespaces, err}
		}
		out.Namespaces = ns
	}
	if v, ok := annotations[AnnotationDiscoverySelectors]; ok {
		sels, err := parseSelectors(v)
		if err != nil {
			return Scope{}, &annotationError{AnnotationDiscoverySelectors, err}
		}
		out.DiscoverySelectors = sels
	}
	return out, nil
}

// parseNamespaces reads a value with --namespaces' own parser (pflag's
// string slice: comma separated, CSV quoting), so that the annotation
// takes what the flag takes. Each must then be a namespace name: a typo
// would otherwise leave a running cluster's registry failing its watches.
func parseNamespaces(v string) ([]string, error) {
	fs := pflag.NewFlagSet(AnnotationNamespaces, pflag.ContinueOnError)
	ns := fs.StringSlice("namespaces", nil, "")
	if err := fs.Set("namespaces", v); err != nil {
		return nil, err
	}
	for _, n := range *ns {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", n, strings.Join(errs, "; "))
		}
	}
	if len(*ns) == 0 {
		return nil, nil
	}
	return *ns, nil
}

// parseSelectors reads one selector per line, each checked with the
// parser the registry applies to --discovery-selectors (labels.Parse);
// blank lines are skipped.
func parseSelectors(v string) ([]string, error) {
	var out []string
	for line := range strings.Lines(v) {
		s := strings.TrimSpace(line)
		if s == "" {
			continue
		}
		if _, err := labels.Parse(s); err != nil {
			return nil, fmt.Errorf("selector %q: %w", s, err)
		}
		out = append(out, s)
	}
	return out, nil
}
