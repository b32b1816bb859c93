package main

import (
	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/cli"
)

// newRootCommand builds the meshpilot command and its subcommands. The
// demo is a binary of its own, cmd/meshpilot-demo, so that grpc-go's xDS
// client, which only the demo uses, is not linked into the control plane.
func newRootCommand() *cobra.Command {
	root := cli.NewRoot(&cobra.Command{
		Use:   "meshpilot",
		Short: "A control plane for service meshes",
		Long: "meshpilot watches Kubernetes services and endpoints and serves them to proxies\n" +
			"and proxyless gRPC clients over xDS.",
	})
	root.AddCommand(newVersionCommand(), newWatchCommand(), newServeCommand(), newBootstrapCommand(), newStatusCommand())
	return root
}
