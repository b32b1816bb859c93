package translate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

const project = "github.com/meshpilot/meshpilot/"

// TestLayers pins the direction between building resources and serving
// them: translate, which builds them, imports nothing that serves them;
// internal/xds, which serves them, may import translate and the type
// URLs (xds/resource), which import nothing of meshpilot, and nothing
// above it (the assembly, registries, debug pages, metrics); the model
// that both read imports neither.
func TestLayers(t *testing.T) {
	for _, tc := range []struct {
		pkg    string // relative to this folder
		name   string
		allows func(dep string) bool
	}{
		{".", "translate", func(dep string) bool {
			// Nothing that serves: not the xDS server (its type URLs
			// excepted), nor the push that drives it, nor the assembly,
			// nor gRPC's server.
			switch {
			case dep == project+"internal/xds/resource":
				return true
			case under(dep, project+"internal/xds"), under(dep, project+"internal/server"), under(dep, project+"internal/push"):
				return false
			}
			return dep != "google.golang.org/grpc"
		}},
		{"../xds/resource", "xds/resource", func(dep string) bool {
			return dep == project+"internal/xds/resource" || !strings.HasPrefix(dep, project)
		}},
		{"../xds", "xds", func(dep string) bool {
			// Serving reads the model through its interfaces and reports
			// through Observer: never the assembly, the registries, the
			// debug pages or the metrics above it.
			for _, above := range []string{"internal/server", "internal/registry", "internal/debug", "internal/metrics", "internal/multicluster"} {
				if under(dep, project+above) {
					return false
				}
			}
			return true
		}},
		{"../model", "model", func(dep string) bool {
			return !under(dep, project+"internal/xds") && !under(dep, project+"internal/translate")
		}},
	} {
		for _, dep := range testutil.Deps(t, tc.pkg) {
			if !tc.allows(dep) {
				t.Errorf("%s imports %s", tc.name, dep)
			}
		}
	}
}

// under says whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestEndpointsComeThroughEndpointsOf: a host that ServiceEntries of
// several namespaces define is one service in the registry with the
// other definitions in its Others, each with its own endpoints. A
// generator that asks the discovery for a hostname's endpoints gets the
// registry's definition's for every namespace, so translate and the
// debug pages read endpoints through model.EndpointsOf and
// EndpointsByPortNameOf, never with the discovery's methods.
func TestEndpointsComeThroughEndpointsOf(t *testing.T) {
	for _, dir := range []string{".", "../debug"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Endpoints" && sel.Sel.Name != "EndpointsByPortName") {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "model" {
					return true // a function of the model, not a discovery's method
				}
				t.Errorf("%s: calls %s.%s: read endpoints with model.EndpointsOf or EndpointsByPortNameOf, which know a definition's own", fset.Position(call.Pos()), types.ExprString(sel.X), sel.Sel.Name)
				return true
			})
		}
	}
}
