package translate_test

import (
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
