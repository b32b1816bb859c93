package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/audit"
)

// exitDifferences is the exit code of `status consistency` when the
// audit finds differences; other failures exit 1.
const exitDifferences = 3

func newStatusConsistencyCommand(f *statusFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "consistency",
		Short: "Audit meshpilot's Kubernetes caches and model against the API server; exit 3 when they differ",
		Long: `consistency asks a running meshpilot to audit itself (/debug/consistencyz):
it lists every watched kind afresh from the API server (Services,
EndpointSlices, Pods, Nodes, Namespaces, and Istio's DestinationRules,
VirtualServices, ServiceEntries and WorkloadEntries when their CRDs are
installed; paginated, 500 a page) and compares each informer cache with the
LIST (by UID and resourceVersion, and for Pods and Nodes the fields
meshpilot keeps of them), then its model with a model rebuilt from scratch
from the LIST (each service field by field, and the endpoints of each
port). Each difference is one line:

  KIND  OBJECT  FIELD  CACHE  LIST  SINCE

CACHE is what meshpilot holds (the cache's value, or the model's), LIST
what the API server says (or the model rebuilt from it), "absent" when the
object is not there; SINCE is when an audit first found it, and how many
audits in a row have. A difference found once may be an event still on its
way; one that stays means a watch event was lost: with --audit-interval,
meshpilot relists the kind once a difference has outlived two audits.

Only the local cluster is audited, not remote clusters. The exit code is 3
when there are differences, 1 when the page cannot be read (meshpilot serves
files, or has not synced yet), else 0.`,
		Example: `  meshpilot status --server http://127.0.0.1:15014 consistency`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep audit.Report
			if err := getJSON(cmd.Context(), *f, "/debug/consistencyz", &rep); err != nil {
				return err
			}
			return printConsistency(cmd.OutOrStdout(), rep)
		},
	}
}

// printConsistency prints one line per difference and a summary; the
// error, when there are differences, carries exitDifferences.
func printConsistency(w io.Writer, rep audit.Report) error {
	objects := 0
	for _, l := range rep.Listed {
		objects += l.Objects
	}
	listed := fmt.Sprintf("%s of %s listed, %s rebuilt, in %s", plural(objects, "object"), plural(len(rep.Listed), "kind"),
		plural(rep.Services, "service"), rep.Took)
	if len(rep.Differences) == 0 {
		_, err := fmt.Fprintf(w, "✔ The informer caches and the model match the API server: %s.\n", listed)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "KIND\tOBJECT\tFIELD\tCACHE\tLIST\tSINCE")
	var kinds []string
	perKind := map[string]int{}
	for _, d := range rep.Differences {
		if perKind[d.Kind] == 0 {
			kinds = append(kinds, d.Kind)
		}
		perKind[d.Kind]++
		field := d.Field
		if field == "" {
			field = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (%s)\n", d.Kind, d.Object, field, d.Cache, d.List,
			d.Since.UTC().Format(time.RFC3339), plural(d.Audits, "audit"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var counts []string
	for _, k := range kinds {
		counts = append(counts, fmt.Sprintf("%s %d", k, perKind[k]))
	}
	if _, err := fmt.Fprintf(w, "%s (%s); %s.\n", plural(len(rep.Differences), "difference"), strings.Join(counts, ", "), listed); err != nil {
		return err
	}
	return exitError{code: exitDifferences, msg: fmt.Sprintf("%s between meshpilot and the API server", plural(len(rep.Differences), "difference"))}
}
