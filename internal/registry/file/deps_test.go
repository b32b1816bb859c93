package file_test

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestConvertsWithoutTheKubernetesRegistry: the file registry converts
// through kubeconv, as the Kubernetes registry does, and needs none of the
// latter's informers and work queue.
func TestConvertsWithoutTheKubernetesRegistry(t *testing.T) {
	for _, dep := range testutil.Deps(t, ".") {
		if dep == "github.com/meshpilot/meshpilot/internal/registry/kube" {
			t.Errorf("the file registry imports %s", dep)
		}
	}
}
