package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/testutil"
)

// startProcess runs bin until the test ends, then stops it with SIGTERM
// and expects a clean exit. It returns the process's output so far.
func startProcess(t *testing.T, bin string, args ...string) *testutil.Buffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s exited with %v; output:\n%s", bin, err, out.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGTERM; output:\n%s", bin, out.String())
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", args, out.String())
		}
	})
	return out
}

// runProcess runs bin to its end (at most 30 s) and returns its combined
// output and exit code.
func runProcess(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%v still running after 30 s; output:\n%s", args, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
