package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// A meshpilotBuild is one way to build cmd/meshpilot.
type meshpilotBuild struct {
	// name says which build it is in results and progress lines.
	name string
	// env is added to go build's environment.
	env []string
	// flags come after "go build".
	flags []string
}

var (
	// goBuild is go build's default, as the README's "go run" and
	// "go build" commands build meshpilot.
	goBuild = meshpilotBuild{name: "go build"}
	// releaseBuild is how the Dockerfile builds the image's binary, but
	// for its -X of the version: static, without file paths, grpc-go's
	// x/net/trace (see the Dockerfile), symbol table or DWARF.
	// TestReleaseBuildIsTheDockerfiles checks that the Dockerfile still
	// builds so.
	releaseBuild = meshpilotBuild{
		name:  "release",
		env:   []string{"CGO_ENABLED=0"},
		flags: []string{"-trimpath", "-tags", "grpcnotrace", "-ldflags", "-s -w"},
	}
)

// buildMeshpilot builds cmd/meshpilot of the module in the current folder
// into dir/meshpilot, as b says, and returns the binary's path.
func buildMeshpilot(ctx context.Context, dir string, b meshpilotBuild) (string, error) {
	bin := filepath.Join(dir, "meshpilot")
	args := append([]string{"build", "-o", bin}, b.flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/meshpilot/meshpilot/cmd/meshpilot")...)
	cmd.Env = append(os.Environ(), b.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building meshpilot (%s; run from the meshpilot repository, or pass --meshpilot): %w\n%s", b.name, err, out)
	}
	return bin, nil
}
