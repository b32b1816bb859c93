package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds meshpilot once per test run, with version and commit set
// the way releases set them, into the user cache folder (overwritten by
// the next run, so nothing piles up).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(cache, "meshpilot", "test-bin")
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		tmp, err := os.CreateTemp(dir, "meshpilot-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		out, err := exec.Command("go", "build", "-o", tmp.Name(),
			"-ldflags", "-X main.version=v9.9.9-test -X main.commit=abc123", ".").CombinedOutput()
		if err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binPath = filepath.Join(dir, "meshpilot")
		buildErr = os.Rename(tmp.Name(), binPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running meshpilot whose stdout is read line by line.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *testutil.Buffer
	done   chan struct{}
	err    error
	seen   []string
}

// cleanEnv is the environment without anything that points to a cluster.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "KUBERNETES_SERVICE_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

func start(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = environ
	if cmd.Env == nil {
		cmd.Env = cleanEnv("HOME=" + t.TempDir())
	}
	// An io.Pipe rather than StdoutPipe: Wait then waits for the copy to
	// finish, so no output is lost when the process ends.
	stdout, pw := io.Pipe()
	cmd.Stdout = pw
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 1000), stderr: &testutil.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("meshpilot %s\nstdout seen:\n%s\nstderr:\n%s", strings.Join(args, " "), strings.Join(p.seen, "\n"), p.stderr.String())
		}
	})
	return p
}

// expect waits for a stdout line containing all the parts, in order of
// arrival, and returns it. Lines before it are kept for diagnostics.
func (p *proc) expect(parts ...string) string {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("meshpilot ended before printing a line with %q", parts)
			}
			p.seen = append(p.seen, l)
			if containsAll(l, parts) {
				return l
			}
		case <-deadline:
			p.t.Fatalf("no line with %q within 20s", parts)
		}
	}
}

// next returns the next stdout line.
func (p *proc) next() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("meshpilot ended")
		}
		p.seen = append(p.seen, l)
		return l
	case <-time.After(20 * time.Second):
		p.t.Fatal("no line within 20s")
	}
	return ""
}

// waitStderr waits for stderr to contain s.
func (p *proc) waitStderr(s string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("stderr has no %q within 20s", s)
		}
		select {
		case <-p.done:
			if !strings.Contains(p.stderr.String(), s) {
				p.t.Fatalf("meshpilot ended without %q on stderr", s)
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// interrupt sends SIGINT and asserts a clean exit with code 0 and only
// slog lines on stderr.
func (p *proc) interrupt() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Fatal("meshpilot did not stop within 15s of SIGINT")
	}
	if p.err != nil {
		p.t.Errorf("exit after SIGINT: %v, want exit code 0", p.err)
	}
	assertSlogOnly(p.t, p.stderr.String())
}

// wait waits for the process to end by itself and returns its exit code.
func (p *proc) wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("meshpilot still running after %s", limit)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatal(p.err)
	return -1
}

// assertSlogOnly checks that every stderr line comes from slog's text
// handler (or is the final error line), so nothing is in klog's format.
func assertSlogOnly(t *testing.T, stderr string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" && !strings.HasPrefix(l, "time=") && !strings.HasPrefix(l, "meshpilot: ") {
			t.Errorf("stderr line not from slog: %q", l)
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// kubeconfigWithNamespace writes a copy of the test kubeconfig whose
// context has the given default namespace.
func kubeconfigWithNamespace(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func runToEnd(t *testing.T, environ []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = environ
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("meshpilot %v did not end within 30s", args)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
