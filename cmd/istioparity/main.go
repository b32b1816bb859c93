// Command istioparity compares what meshpilot and istiod serve for the
// same clusters (internal/parity) and prints every difference that the
// list of intended ones does not explain. It exits 1 when there is one.
//
//	bash tools/istioparity/build.sh   # builds istiod's pilot-discovery once
//	go run ./cmd/istioparity
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshpilot/meshpilot/internal/parity"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

func main() {
	var (
		istiod, meshpilot, intended, logDir string
		cases                               []string
	)
	cmd := &cobra.Command{
		Use:           "istioparity",
		Short:         "compare what meshpilot and istiod serve for the same clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := testenv.RepoRoot()
			if err != nil {
				return err
			}
			if istiod == "" {
				out, err := exec.Command("bash", filepath.Join(root, "tools/istioparity/build.sh")).Output()
				if err != nil {
					return fmt.Errorf("building pilot-discovery (tools/istioparity/build.sh): %w", err)
				}
				istiod = strings.TrimSpace(string(out))
			}
			if meshpilot == "" {
				meshpilot = filepath.Join(os.TempDir(), "istioparity-meshpilot")
				build := exec.Command("go", "build", "-o", meshpilot, "./cmd/meshpilot")
				build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
				if err := build.Run(); err != nil {
					return fmt.Errorf("building meshpilot: %w", err)
				}
			}
			if intended == "" {
				intended = filepath.Join(root, "tools/istioparity/intended.yaml")
			}
			list, err := parity.LoadIntended(intended)
			if err != nil {
				return err
			}
			if len(cases) == 0 {
				cases = []string{filepath.Join(root, "internal/translate/testdata/in/*.yaml"), filepath.Join(root, "tools/istioparity/cases/*.yaml")}
			}
			var files []string
			for _, g := range cases {
				m, err := filepath.Glob(g)
				if err != nil {
					return err
				}
				files = append(files, m...)
			}
			if logDir == "" {
				if logDir, err = os.MkdirTemp("", "istioparity-"); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			results, err := parity.Run(ctx, parity.Options{Istiod: istiod, Meshpilot: meshpilot, Cases: files, Intended: list, LogDir: logDir, Log: os.Stderr})
			n := parity.Report(os.Stdout, results)
			shown := intended
			if wd, err := os.Getwd(); err == nil {
				if rel, err := filepath.Rel(wd, intended); err == nil {
					shown = rel
				}
			}
			fmt.Fprintf(os.Stdout, "%d differences outside %s; the servers' logs are in %s\n", n, shown, logDir)
			if err != nil {
				return err
			}
			if n > 0 {
				os.Exit(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&istiod, "istiod", "", "pilot-discovery binary (default: build it with tools/istioparity/build.sh)")
	f.StringVar(&meshpilot, "meshpilot", "", "meshpilot binary (default: go build ./cmd/meshpilot)")
	f.StringArrayVar(&cases, "cases", nil, "case files, globs allowed, repeatable (default: the generators' golden cases and tools/istioparity/cases)")
	f.StringVar(&intended, "intended", "", "the intended differences (default: tools/istioparity/intended.yaml)")
	f.StringVar(&logDir, "logs", "", "folder for the servers' logs (default: a temporary one)")
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "istioparity:", err)
		os.Exit(2)
	}
}
