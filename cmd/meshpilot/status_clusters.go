package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
)

// exitNotSynced is the exit code of `status clusters` when a cluster is
// not synced: sysexits.h's EX_UNAVAILABLE ("a service is unavailable"),
// apart from 1 (the debug pages cannot be read) and from `status
// config`'s 79.
const exitNotSynced = 69

func newStatusClustersCommand(f *statusFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "clusters",
		Short: "List the local and remote clusters meshpilot reads and their state; exit 69 when one is not synced",
		Long: `clusters reads /debug/clusterz and prints one line per cluster: the local
one (--cluster-id) first, then each remote cluster of a remote Secret, with
its Secret, API server, state, since when, and the last error seen.

A state is one of:
  synced       its registry has synced and its API server answers
  syncing      added, its registry has not synced yet
  timeout      not synced within --remote-sync-timeout; served as it fills
  unreachable  synced once, its API server does not answer now; its last
               endpoints stay served

The exit code is 69 when a cluster is not synced, 1 when the debug pages
cannot be read, else 0.`,
		Example: `  meshpilot status --server http://127.0.0.1:15014 clusters`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var clusters []clusterstate.Cluster
			if err := getJSON(cmd.Context(), *f, "/debug/clusterz", &clusters); err != nil {
				return err
			}
			return printClusters(cmd.OutOrStdout(), clusters, time.Now())
		},
	}
}

// printClusters prints the clusters as a table; the error, when one is
// not synced, carries exitNotSynced.
func printClusters(w io.Writer, clusters []clusterstate.Cluster, now time.Time) error {
	if len(clusters) == 0 {
		_, err := fmt.Fprintln(w, "No clusters: meshpilot serves a folder (serve --from).")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tSECRET\tAPI SERVER\tSTATE\tSINCE\tLAST ERROR")
	var notSynced []string
	for _, c := range clusters {
		id, secret, since, lastErr := c.ID, c.Secret, "-", c.LastError
		if c.Local {
			id += " (local)"
		}
		if secret == "" {
			secret = "-"
		}
		if !c.Since.IsZero() {
			since = now.Sub(c.Since).Round(time.Second).String() + " ago"
		}
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, secret, dash(c.APIServer), c.State, since, lastErr)
		if c.State != clusterstate.Synced {
			notSynced = append(notSynced, c.ID+" ("+string(c.State)+")")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notSynced) > 0 {
		return exitError{code: exitNotSynced, msg: "not synced: " + strings.Join(notSynced, ", ")}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
