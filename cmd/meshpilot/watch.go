package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/cli"
	"github.com/meshpilot/meshpilot/internal/kubeclient"
	"github.com/meshpilot/meshpilot/internal/watch"
)

func newWatchCommand() *cobra.Command {
	var (
		kubeconfig    string
		namespaces    []string
		allNamespaces bool
		opts          watch.Options
	)
	cmd := &cobra.Command{
		Use:   "watch [RESOURCES]",
		Short: "Print changes of Kubernetes resources as they happen",
		Long: `Print one line per ADDED, MODIFIED or DELETED event of the given resources,
with a short summary of each object, until interrupted.

RESOURCES is a comma-separated list; each item may be a plural, singular or
short name (svc, po, no, ns...), a kind, or <resource>.<group> for any
resource the server serves, custom resources included. The default is
` + strings.Join(watch.DefaultResources, ",") + `.

Namespaces follow kubectl: namespaced resources are watched in the
namespace of the kubeconfig's current context (or "default"), in the
namespaces given with -n (repeatable or comma-separated), or in all of
them with -A, which wins over -n. Cluster-scoped resources ignore -n.
Existing objects are printed first, as ADDED.

Text output: time (RFC 3339, milliseconds, UTC), event, kind,
namespace/name, rv=<resourceVersion>, then the summary as key=value.
JSON output (-o json): one object per line with the fields time, event,
kind, apiVersion, namespace (omitted for cluster-scoped objects), name,
resourceVersion and summary (an object of the same keys and values); the
full object is not included.`,
		Example: `  meshpilot watch
  meshpilot watch svc,endpointslices -n demo -o json
  meshpilot watch pods -A -l app=web
  meshpilot watch widgets.example.com`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Resources = strings.Split(args[0], ",")
			}
			if opts.Output != watch.Text && opts.Output != watch.JSON {
				return cmd.FlagErrorFunc()(cmd, fmt.Errorf("invalid -o %q: use text or json", opts.Output))
			}
			log := cli.Logger(cmd)
			loaded, err := kubeclient.LoadWithNamespace(kubeconfig)
			if err != nil {
				return err
			}
			log.Debug("client configuration", "source", loaded.Source, "server", loaded.Config.Host)
			if err := kubeclient.Check(cmd.Context(), loaded.Config); err != nil {
				return err
			}
			opts.Namespaces = watch.Namespaces(namespaces, allNamespaces, loaded.Namespace)
			opts.Out = cmd.OutOrStdout()
			opts.Log = log
			return watch.Run(cmd.Context(), loaded.Config, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	f.StringSliceVarP(&namespaces, "namespace", "n", nil, "namespace(s) to watch namespaced resources in (default: the kubeconfig's)")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "watch namespaced resources in all namespaces")
	f.StringVarP(&opts.LabelSelector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&opts.FieldSelector, "field-selector", "", "field selector, e.g. spec.nodeName=node-1")
	f.StringVarP(&opts.Output, "output", "o", watch.Text, "output format: text or json")
	return cmd
}
