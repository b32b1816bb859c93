package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"k8s.io/klog/v2"
)

// NewLogger builds a logger writing to w in the given format ("text" or
// "json") at the given level ("debug", "info", "warn" or "error").
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("invalid --log-format %q: use text or json", format)
	}
}

// SetupLogging builds the logger with NewLogger, makes it slog's default
// and sends everything client-go logs through klog to it, so that no line
// comes out in klog's own format. At debug level, klog's verbosity is
// raised to 2 so that client-go's more detailed messages show too.
func SetupLogging(w io.Writer, format, level string) (*slog.Logger, error) {
	log, err := NewLogger(w, format, level)
	if err != nil {
		return nil, err
	}
	slog.SetDefault(log)
	klog.SetSlogLogger(log.With("source", "client-go"))
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := "0"
	if log.Enabled(context.Background(), slog.LevelDebug) {
		v = "2"
	}
	if err := fs.Set("v", v); err != nil {
		return nil, err
	}
	return log, nil
}
