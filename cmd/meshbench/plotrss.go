package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/bench"
)

// newPlotRSSCommand draws meshpilot's RSS against services from the JSON
// results of several runs.
func newPlotRSSCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "plot-rss --out FILE RESULT.json...",
		Short: "Draw meshpilot's RSS against services from several meshbench --json results as an SVG",
		Long: `plot-rss reads results that meshbench --json wrote and draws, per workload
shape (endpoints per service, clients, services per client), meshpilot's
peak RSS over each run (VmHWM, solid, with its value) and its RSS once
every client converged (dashed) against the number of services. Repeated
runs of one shape and size are drawn as their median.`,
		Example:       `  meshbench plot-rss --out docs/rss-services.svg s1000.json s5000.json s10000.json s50000.json`,
		Args:          cobra.MinimumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, paths []string) error {
			if out == "" {
				return errors.New("--out is required: the SVG file to write")
			}
			var results []*bench.Result
			for _, p := range paths {
				r, err := bench.ReadResult(p)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			return writePlot(out, func(w io.Writer) error { return bench.WriteRSSPlot(w, results) })
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the SVG file to write")
	return cmd
}
