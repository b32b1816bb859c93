package main

import (
	"encoding/json"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/bench"
)

func newIdleCommand() *cobra.Command {
	cfg := bench.IdleConfig{Runs: 3, Settle: 5 * time.Second}
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "idle",
		Short: "Measure the binary's size and an idle meshpilot serve's RSS against an empty cluster",
		Long: `meshbench idle starts a real etcd and kube-apiserver with nothing written to
them, runs meshpilot serve against it --runs times, one after the other, and
once each is ready (/readyz) and has settled reads VmRSS, RssAnon (heap,
stacks) and RssFile (mostly the binary's own pages) from /proc. It prints
the binary's size and the medians.

Without --meshpilot it builds cmd/meshpilot twice and measures both, in
turn: with go build's defaults, as "go run" and "go build" do, and as the
Dockerfile builds the image's binary (CGO_ENABLED=0, -trimpath,
-tags grpcnotrace, -ldflags "-s -w").`,
		Example:       `  meshbench idle --runs 3 --json idle.json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log = cmd.ErrOrStderr()
			res, err := bench.Idle(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			res.WriteSummary(cmd.OutOrStdout())
			if jsonPath == "" {
				return nil
			}
			b, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				return err
			}
			return os.WriteFile(jsonPath, append(b, '\n'), 0o644)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Meshpilot, "meshpilot", "", "measure this meshpilot binary alone (default: build ./cmd/meshpilot with go build's defaults and as the Dockerfile does, into a temporary folder, and measure both)")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "times each binary is started; figures are medians")
	f.DurationVar(&cfg.Settle, "settle", cfg.Settle, "pause after meshpilot is ready before /proc is read")
	f.StringVar(&jsonPath, "json", "", "write the figures as JSON to this file")
	return cmd
}
