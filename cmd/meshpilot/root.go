package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
)

// newRootCommand builds the meshpilot command and its subcommands.
//
// Logging: the root command's PersistentPreRunE reads --log-format and
// --log-level, builds a *slog.Logger writing to stderr, makes it the
// slog default, routes client-go's klog output into it, and stores it in
// the command's context. Subcommands get it with logger(cmd). They must
// not define a PersistentPreRun of their own, which would replace the
// root's.
func newRootCommand() *cobra.Command {
	var logFormat, logLevel string
	root := &cobra.Command{
		Use:   "meshpilot",
		Short: "A control plane for service meshes",
		Long: "meshpilot watches Kubernetes services and endpoints and serves them to proxies\n" +
			"and proxyless gRPC clients over xDS.",
		// Errors are printed once by run; usage only for usage errors.
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			log, err := setupLogging(cmd.ErrOrStderr(), logFormat, logLevel)
			if err != nil {
				return err
			}
			cmd.SetContext(context.WithValue(cmd.Context(), loggerKey{}, log))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see \"%s --help\")", err, cmd.CommandPath())
	})
	root.AddCommand(newVersionCommand(), newWatchCommand(), newServeCommand(), newDemoCommand(), newBootstrapCommand(), newStatusCommand())
	return root
}

type loggerKey struct{}

// logger returns the logger the root command set up from --log-format and
// --log-level, or slog's default when called outside a command run.
func logger(cmd *cobra.Command) *slog.Logger {
	if l, ok := cmd.Context().Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
