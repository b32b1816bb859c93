package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// markNotReady sets "ready: false" on the endpoint with address ip, as a
// user would in an editor.
func markNotReady(t *testing.T, path, ip string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?s)(- addresses: \["` + regexp.QuoteMeta(ip) + `"\]\s+conditions:\s+ready: )true`)
	if !re.Match(data) {
		t.Fatalf("%s has no ready endpoint %s:\n%s", path, ip, data)
	}
	if err := os.WriteFile(path, re.ReplaceAll(data, []byte("${1}false")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestTrafficFollowsAnEdit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mesh")
	port := grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13")
	out := testutil.NewLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Dir: dir, BackendPort: port, Interval: 200 * time.Millisecond, Out: out, Logger: quietLogger()})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()

	file := filepath.Join(dir, examples.EndpointsFile)
	out.Await(t, "the file to edit", 0, func(l string) bool { return strings.TrimSpace(l) == file })
	backend := func(ip string) string { return fmt.Sprintf("%s:%d", ip, port) }
	out.Await(t, "the backends", 0, func(l string) bool {
		return strings.Contains(l, backend("127.0.0.11")) && strings.Contains(l, backend("127.0.0.13"))
	})
	i := out.Await(t, "traffic on all three backends", 0, func(l string) bool {
		c := testutil.Counts(l)
		return c["127.0.0.11"] > 0 && c["127.0.0.12"] > 0 && c["127.0.0.13"] > 0
	})

	markNotReady(t, file, "127.0.0.12")
	i = out.Await(t, "meshpilot's news of the change", i+1, func(l string) bool {
		return strings.Contains(l, "meshpilot: greeter:") && strings.Contains(l, "127.0.0.12 (eu-west-b) UNHEALTHY")
	})
	out.Await(t, "traffic away from 127.0.0.12", i+1, func(l string) bool {
		c := testutil.Counts(l)
		return len(c) == 3 && c["127.0.0.12"] == 0 && c["127.0.0.11"] > 0 && c["127.0.0.13"] > 0
	})
}

func TestDurationEndsTheDemo(t *testing.T) {
	out := testutil.NewLines()
	start := time.Now()
	err := Run(context.Background(), Options{BackendPort: grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13"), Duration: 1500 * time.Millisecond,
		Interval: 200 * time.Millisecond, Out: out, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the demo took %v", d)
	}
	if !strings.HasSuffix(out.String(), "demo finished") {
		t.Fatalf("output:\n%s", out.String())
	}
	// The temporary copy is removed.
	for _, l := range strings.Split(out.String(), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(l), "manifests  "); ok {
			dir := strings.Fields(f)[0]
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s is still there: %v", dir, err)
			}
			return
		}
	}
	t.Fatalf("no manifests line:\n%s", out.String())
}

func TestClearErrors(t *testing.T) {
	port := grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13")
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.13:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"a backend port is taken", Options{BackendPort: port}, []string{fmt.Sprintf("127.0.0.13:%d", port), "--backend-port"}},
		{"the folder is not empty", Options{Dir: notEmpty}, []string{notEmpty, "not empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Out, tc.opts.Logger = io.Discard, quietLogger()
			tc.opts.Duration = 20 * time.Second
			err := Run(context.Background(), tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestShortError(t *testing.T) {
	err := status.Error(codes.Unavailable, `listener resource error: [xDS node id: sidecar~x]: [xDS node id: sidecar~x]: xds: resource "greeter:7070" has been removed`)
	if got, want := shortError(err), `Unavailable: xds: resource "greeter:7070" has been removed`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
