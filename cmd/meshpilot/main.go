// Command meshpilot is a control plane for service meshes: it watches
// Kubernetes and serves the mesh configuration over xDS.
package main

import (
	"context"
	"io"

	"github.com/meshpilot/meshpilot/internal/cli"
)

func main() { cli.Main(newRootCommand) }

// run executes the command line and returns the exit code (see cli.Run).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(ctx, newRootCommand(), args, stdout, stderr)
}
