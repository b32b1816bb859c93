package cli

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	log, err := NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	if got := b.String(); !strings.HasPrefix(got, `{"time":`) || !strings.Contains(got, `"level":"WARN","msg":"shown","k":"v"}`) || strings.Contains(got, "hidden") {
		t.Errorf("log output %q", got)
	}
	b.Reset()
	log, err = NewLogger(&b, "text", "debug")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("detail")
	if !strings.Contains(b.String(), "level=DEBUG msg=detail") {
		t.Errorf("log output %q", b.String())
	}
}

func TestKlogGoesThroughSlog(t *testing.T) {
	var b strings.Builder
	if _, err := SetupLogging(&b, "json", "info"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil))) })
	klog.InfoS("from client-go", "k", "v")
	klog.V(2).InfoS("too detailed")
	klog.Flush()
	got := b.String()
	if !strings.Contains(got, `"level":"INFO","msg":"from client-go","source":"client-go","k":"v"}`) || strings.Contains(got, "too detailed") {
		t.Errorf("log output %q", got)
	}
	b.Reset()
	if _, err := SetupLogging(&b, "text", "debug"); err != nil {
		t.Fatal(err)
	}
	klog.V(2).InfoS("detail")
	klog.Flush()
	if !strings.Contains(b.String(), `msg=detail source=client-go`) {
		t.Errorf("log output %q", b.String())
	}
}
