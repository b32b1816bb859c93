package main

import (
	"cmp"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/bootstrap"
	"github.com/meshpilot/meshpilot/internal/model"
)

func newBootstrapCommand() *cobra.Command {
	var o bootstrap.Options
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Print a grpc-go xDS bootstrap file for a workload",
		Long: `bootstrap prints the xDS bootstrap JSON that a proxyless gRPC workload
reads to find meshpilot and to tell it who it is (node id, GENERATOR=grpc,
NAMESPACE). Save it and point the workload at it:

  meshpilot bootstrap --xds-server meshpilot.istio-system:15010 \
      --namespace shop --pod cart-7d9f --ip 10.0.0.7 > bootstrap.json
  GRPC_XDS_BOOTSTRAP=$PWD/bootstrap.json ./my-grpc-client   # dials xds:///...

With --ca-cert the client verifies meshpilot's TLS certificate; with --cert
and --key it also presents its own (mTLS), and the same files become the
default certificate provider (file_watcher, reloaded on change).

--pod and --ip default to $POD_NAME and $INSTANCE_IP, as set in a Pod
through the downward API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := bootstrap.JSON(o)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.XDSServer, "xds-server", "127.0.0.1:15010", "meshpilot's xDS address, host:port")
	fl.StringVar(&o.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "default"), "the workload's namespace (default $POD_NAMESPACE or default)")
	fl.StringVar(&o.Pod, "pod", cmp.Or(os.Getenv("POD_NAME"), "client"), "the workload's Pod name")
	fl.StringVar(&o.IP, "ip", cmp.Or(os.Getenv("INSTANCE_IP"), "127.0.0.1"), "the workload's IP address")
	fl.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the Kubernetes node the workload runs on (default $NODE_NAME); optional")
	fl.StringVar(&o.NodeID, "node-id", "", "node id (default sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.<domain suffix>)")
	fl.StringVar(&o.DomainSuffix, "domain-suffix", model.DefaultDomainSuffix, "cluster domain, for the default node id")
	fl.StringVar(&o.CACert, "ca-cert", "", "CA file: connect to meshpilot over TLS and verify its certificate")
	fl.StringVar(&o.Cert, "cert", "", "the workload's certificate file (with --key): mTLS to meshpilot, default certificate provider")
	fl.StringVar(&o.Key, "key", "", "the workload's private key file (with --cert)")
	return cmd
}
