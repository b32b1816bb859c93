// Package testutil holds small helpers that several of meshpilot's test
// packages share: the meshpilot binaries built once per test process,
// meshpilot run in-process, a buffer that is safe to read while a process
// or logger writes to it, free loopback addresses and waiting on an HTTP
// status.
package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/push"
	"github.com/meshpilot/meshpilot/internal/registry/aggregate"
	"github.com/meshpilot/meshpilot/internal/server"
)

// Wait bounds AwaitHTTP.
var Wait = 30 * time.Second

// built holds the binaries built so far in this test process, by command.
var built sync.Map // command name -> *build

type build struct {
	once sync.Once
	path string
	err  error
}

// BuildMeshpilot builds cmd/meshpilot once per test process and returns the
// binary's path. A failed build fails the test.
func BuildMeshpilot(t testing.TB) string {
	t.Helper()
	return BuildCommand(t, "meshpilot")
}

// BuildCommand builds cmd/<name> of this repository once per test process
// and returns the binary's path, named name. A failed build fails the
// test.
func BuildCommand(t testing.TB, name string) string {
	t.Helper()
	v, _ := built.LoadOrStore(name, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", b.path, "github.com/meshpilot/meshpilot/cmd/"+name).CombinedOutput()
		if err != nil {
			b.err = errors.New(string(out))
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}

// deadlineMargin is how long before go test's -timeout Context and
// UntilDeadline end, so that what waits on them fails with its own
// message and output rather than the timeout's panic.
const deadlineMargin = time.Minute

// Context returns a context that ends shortly before the test's deadline
// (go test -timeout), or when the test ends: the bound of work whose
// length says nothing about the code under test, a build above all, which
// takes minutes on a busy machine. It has no limit of its own.
func Context(t testing.TB) context.Context {
	ctx := t.Context()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-deadlineMargin))
			t.Cleanup(cancel)
		}
	}
	return ctx
}

// UntilDeadline is how long the test may still wait: until shortly
// before its deadline (go test -timeout), or a day without one. See
// Context.
func UntilDeadline(t testing.TB) time.Duration {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			return max(time.Until(deadline.Add(-deadlineMargin)), 0)
		}
	}
	return 24 * time.Hour
}

// Buffer collects output; it may be read while it is written.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeAddr returns a loopback address whose port is free right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// AwaitHTTP polls url with GET until it answers code, or fails the test
// after Wait.
func AwaitHTTP(t testing.TB, url string, code int) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond) // between polls
	}
	t.Fatalf("%s never answered %d: last %s", url, code, last)
}

// RunServer runs meshpilot in-process on loopback over reg (leading-edge
// debounce), waits until it is ready and stops it when the test ends.
func RunServer(t testing.TB, reg model.Controller, log *slog.Logger) *server.Server {
	t.Helper()
	return RunServerWith(t, server.Options{
		Sources:  []aggregate.Source{{Name: fmt.Sprintf("%T", reg), Controller: reg}},
		Debounce: push.Options{LeadingEdge: true}, Logger: log,
	})
}

// RunServerWith is RunServer with the options of a test that needs more
// (TLS, say); the addresses are loopback ones whatever opts say.
func RunServerWith(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	opts.XDSAddr, opts.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("meshpilot: %v", err)
		}
	})
	AwaitHTTP(t, "http://"+srv.HTTPAddr()+"/readyz", http.StatusOK)
	return srv
}
