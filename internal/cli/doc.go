// Package cli is what meshpilot's commands share: the root command with
// --log-format and --log-level, the logger it sets up, and how a command
// line runs and exits. Each binary (meshpilot, meshpilot-demo) builds its
// own root with it, so that a command links only what it uses.
package cli
