package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
)

// NewRoot makes root a binary's root command: it adds --log-format and
// --log-level, prints errors once (through Run) and usage only for usage
// errors, and names the command's help in flag errors.
//
// Logging: root's PersistentPreRunE reads --log-format and --log-level,
// builds a *slog.Logger writing to stderr with SetupLogging and stores it
// in the command's context. Commands get it with Logger(cmd). They must
// not define a PersistentPreRun of their own, which would replace the
// root's.
func NewRoot(root *cobra.Command) *cobra.Command {
	var logFormat, logLevel string
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		log, err := SetupLogging(cmd.ErrOrStderr(), logFormat, logLevel)
		if err != nil {
			return err
		}
		cmd.SetContext(context.WithValue(cmd.Context(), loggerKey{}, log))
		return nil
	}
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see \"%s --help\")", err, cmd.CommandPath())
	})
	return root
}

type loggerKey struct{}

// Logger returns the logger the root command set up from --log-format and
// --log-level, or slog's default when called outside a command run.
func Logger(cmd *cobra.Command) *slog.Logger {
	if l, ok := cmd.Context().Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
