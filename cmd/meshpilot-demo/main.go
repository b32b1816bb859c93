// Command meshpilot-demo shows meshpilot at work with nothing else
// installed: a small mesh served on this machine and a proxyless grpc-go
// client whose traffic follows edits of the mesh's files. It is a binary
// of its own so that grpc-go's xDS client, which only the demo needs, is
// not linked into meshpilot.
package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/cli"
	"github.com/meshpilot/meshpilot/internal/demo"
)

func main() { cli.Main(newDemoCommand) }

func newDemoCommand() *cobra.Command {
	var o demo.Options
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "meshpilot-demo",
		Short: "Run a small mesh on this machine and watch traffic follow your edits",
		Long: `meshpilot-demo shows meshpilot at work with nothing else installed. It
copies the bundled example mesh (a service "greeter" with three endpoints on
127.0.0.11-13) into a folder, serves it with meshpilot (file registry,
loopback, free ports), starts a gRPC server for each endpoint and runs a
proxyless grpc-go client against xds:///greeter.demo.svc.cluster.local:7070.
Every second it prints how many RPCs each backend answered.

Edit the file it names (mark an endpoint "ready: false", delete one, break
the YAML) and watch the next lines. Ctrl-C ends the demo.

meshpilot's own log goes to stderr at level warn unless --log-level says
otherwise, so that broken edits show and the rest stays quiet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := cli.Logger(cmd)
			if !cmd.Flags().Changed("log-level") {
				format, _ := cmd.Flags().GetString("log-format")
				if l, err := cli.NewLogger(cmd.ErrOrStderr(), format, "warn"); err == nil {
					log = l
				}
			}
			o.Out = cmd.OutOrStdout()
			o.Logger = log
			return demo.Run(cmd.Context(), o)
		},
	})
	fl := cmd.Flags()
	fl.StringVar(&o.Dir, "dir", "", "copy the example mesh into this new or empty folder and keep it (default: a temporary folder, removed at the end)")
	fl.IntVar(&o.BackendPort, "backend-port", 0, "port of the demo's backends (default: the example's, 50051)")
	fl.DurationVar(&o.Duration, "duration", 0, "end the demo after this long (default: run until Ctrl-C)")
	fl.DurationVar(&o.Interval, "interval", time.Second, "time between report lines")
	return cmd
}
