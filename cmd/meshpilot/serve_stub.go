package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newServeCommand is a placeholder until the serve command is written.
func newServeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the mesh configuration over xDS",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("not built yet")
		},
	}
}
