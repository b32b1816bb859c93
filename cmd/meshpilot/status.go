package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/debug"
	"github.com/meshpilot/meshpilot/internal/model"
)

type statusFlags struct {
	server  string
	timeout time.Duration
}

func newStatusCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the xDS clients of a running meshpilot and whether each is in sync",
		Long: `status reads the debug pages of a running meshpilot and prints one line per
xDS stream: the client's node id, namespace and kind (grpc or envoy), and for
each resource type whether it is SYNCED (the client ACKed the latest
response), STALE (a response is not acknowledged yet), NACKED (the client
rejected the latest response; the error follows the table) or NOT SENT.
A "-" means the client never asked for that type.

"status services" lists the services meshpilot knows, with their endpoints.

"status config" prints the problems of the Istio and Gateway API objects
meshpilot read,
as istioctl analyze does (see "status config --help").

"status consistency" audits meshpilot's Kubernetes caches and model against
the API server and prints each difference (see "status consistency --help").

"status clusters" lists the local and remote clusters and their state
(see "status clusters --help").

--server is the address of meshpilot's debug pages: its --http-addr, or its
--debug-addr when set.`,
		Example: `  meshpilot status --server http://127.0.0.1:15014
  meshpilot status --server http://127.0.0.1:15014 services
  meshpilot status --server http://127.0.0.1:15014 config
  meshpilot status --server http://127.0.0.1:15014 consistency
  meshpilot status --server http://127.0.0.1:15014 clusters`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var clients []debug.SyncStatus
			if err := getJSON(cmd.Context(), f, "/debug/syncz", &clients); err != nil {
				return err
			}
			return printClients(cmd.OutOrStdout(), clients)
		},
	}
	cmd.PersistentFlags().StringVar(&f.server, "server", "http://localhost:15014", "URL of meshpilot's debug pages (its --http-addr, or --debug-addr when set)")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for an answer")
	cmd.AddCommand(&cobra.Command{
		Use:   "services",
		Short: "List the services meshpilot knows, with their ports and endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var svcs []model.Service
			if err := getJSON(cmd.Context(), f, "/debug/registryz", &svcs); err != nil {
				return err
			}
			var eps []debug.ServiceEndpoints
			if err := getJSON(cmd.Context(), f, "/debug/endpointz", &eps); err != nil {
				return err
			}
			return printServices(cmd.OutOrStdout(), svcs, eps)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "config",
		Short: "Print the problems of the Istio and Gateway API objects meshpilot read, as istioctl analyze does; exit 79 when one is refused",
		Long: `config reads /debug/configz and prints one line per problem of the Istio
objects meshpilot read, as istioctl analyze does:

  Error [refused] (KIND NAMESPACE/NAME) FIELD: WHY
      the object is not applied; its last good version, if any, stays in force
  Warning [ports-differ] (Service HOSTNAME) spec.ports: WHY
      several clusters (or sources) define the service with different ports;
      the first definition is served
  Info [ignored-for-grpc] (KIND NAMESPACE/NAME) FIELD: WHY
      proxyless gRPC clients do not get this field (WHY says what they get)
  Info [ignored-for-envoy] (KIND NAMESPACE/NAME) FIELD: WHY
      Envoy clients do not get this field

An object read from a file (serve --from) is named with its file, line and
document. A summary line follows. The exit code is 79 when an object is
refused (istioctl analyze's when it finds issues), 1 when the debug pages
cannot be read, else 0 (warnings included).`,
		Example: `  meshpilot status --server http://127.0.0.1:15014 config`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var z debug.Configz
			if err := getJSON(cmd.Context(), f, "/debug/configz", &z); err != nil {
				return err
			}
			return printConfigProblems(cmd.OutOrStdout(), z)
		},
	})
	cmd.AddCommand(newStatusConsistencyCommand(&f))
	cmd.AddCommand(newStatusClustersCommand(&f))
	return cmd
}

// getJSON reads one debug page into v.
func getJSON(ctx context.Context, f statusFlags, path string, v any) error {
	base := strings.TrimSuffix(f.server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := base + path
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("bad --server %q: %w", f.server, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading %s: %w (is meshpilot running, and is --server its --http-addr or --debug-addr?)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = " (when meshpilot runs with --debug-addr, point --server there)"
		}
		return fmt.Errorf("reading %s: %s: %s%s", url, resp.Status, strings.TrimSpace(string(body)), hint)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("reading %s: not a meshpilot debug page: %w", url, err)
	}
	return nil
}

var statusTypes = []string{"LDS", "RDS", "CDS", "EDS"}

func printClients(w io.Writer, clients []debug.SyncStatus) error {
	if len(clients) == 0 {
		_, err := fmt.Fprintln(w, "No xDS clients connected.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tTYPE\tLDS\tRDS\tCDS\tEDS\tNACKS\tCONNECTED")
	var nacks []string
	for _, c := range clients {
		name := c.NodeID
		if name == "" {
			name = fmt.Sprintf("(stream %d, no request yet)", c.Stream)
		}
		if c.Delta {
			name += " (delta)"
		}
		ns := c.Namespace
		if ns == "" {
			ns = "-"
		}
		cols := []string{name, ns, c.Type}
		for _, t := range statusTypes {
			ts := c.Types[t]
			if ts == nil {
				cols = append(cols, "-")
				continue
			}
			cols = append(cols, ts.Status)
			if ts.Status == "NACKED" && ts.LastNACK != nil {
				nacks = append(nacks, fmt.Sprintf("%s %s version %s: %s", name, t, ts.LastNACK.Version, ts.LastNACK.Error))
			}
		}
		cols = append(cols, fmt.Sprint(c.NACKs), c.Connected.Local().Format(time.DateTime))
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(nacks) > 0 {
		fmt.Fprintln(w, "\nRejected configuration:")
		for _, n := range nacks {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

func printServices(w io.Writer, svcs []model.Service, eps []debug.ServiceEndpoints) error {
	if len(svcs) == 0 {
		_, err := fmt.Fprintln(w, "No services.")
		return err
	}
	// A host several namespaces define has an entry per definition,
	// told apart by namespace.
	type def struct {
		host model.Hostname
		ns   string
	}
	counts := map[def][2]int{} // healthy, total
	for _, se := range eps {
		var c [2]int
		for _, p := range se.Ports {
			for _, e := range p.Endpoints {
				if e.Health == model.Healthy {
					c[0]++
				}
				c[1]++
			}
		}
		counts[def{se.Hostname, se.Namespace}] = c
	}
	slices.SortFunc(svcs, func(a, b model.Service) int { return strings.Compare(string(a.Hostname), string(b.Hostname)) })
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "HOSTNAME\tNAMESPACE\tRESOLUTION\tPORTS\tENDPOINTS (HEALTHY/ALL)")
	row := func(s *model.Service, key def) {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		c := counts[key]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\n", s.Hostname, s.Namespace, s.Resolution,
			strings.Join(ports, ","), c[0], c[1])
	}
	for i := range svcs {
		s := &svcs[i]
		if len(s.Others) == 0 {
			row(s, def{s.Hostname, ""})
			continue
		}
		row(s, def{s.Hostname, s.Namespace})
		for _, o := range s.Others {
			row(o, def{o.Hostname, o.Namespace})
		}
	}
	return tw.Flush()
}
