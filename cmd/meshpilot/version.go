package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time:
//
//	go build -ldflags "-X main.version=v0.1.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/meshpilot
var (
	version = "dev"
	commit  = "dev"
)

// buildCommit returns the commit set with -ldflags, else the VCS revision
// that go build recorded (with "-dirty" for a modified tree), else "dev".
func buildCommit() string {
	info, _ := debug.ReadBuildInfo()
	return commitFrom(commit, info)
}

func commitFrom(commit string, info *debug.BuildInfo) string {
	if commit != "dev" && commit != "" {
		return commit
	}
	if info == nil {
		return "dev"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, git commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "meshpilot %s\n", version)
			fmt.Fprintf(out, "git commit: %s\n", buildCommit())
			fmt.Fprintf(out, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
