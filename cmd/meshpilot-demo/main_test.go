package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestDemo runs meshpilot-demo, edits the file it names as a user would
// and reads from its report that traffic left the endpoint marked not
// ready; Ctrl-C ends it cleanly.
func TestDemo(t *testing.T) {
	bin := testutil.BuildCommand(t, "meshpilot-demo")
	dir := filepath.Join(t.TempDir(), "mesh")
	p := testutil.Start(t, exec.Command(bin, "--dir", dir, "--backend-port", strconv.Itoa(grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13")),
		"--interval", "250ms", "--duration", "2m"))

	file := filepath.Join(dir, examples.EndpointsFile)
	p.Out.Await(t, "the file to edit", 0, func(l string) bool { return strings.TrimSpace(l) == file })
	i := p.Out.Await(t, "traffic on all three backends", 0, func(l string) bool {
		c := testutil.Counts(l)
		return c["127.0.0.11"] > 0 && c["127.0.0.12"] > 0 && c["127.0.0.13"] > 0
	})

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?s)(- addresses: \["127\.0\.0\.12"\]\s+conditions:\s+ready: )true`)
	if !re.Match(data) {
		t.Fatalf("the example has no ready endpoint 127.0.0.12:\n%s", data)
	}
	if err := os.WriteFile(file, re.ReplaceAll(data, []byte("${1}false")), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Out.Await(t, "traffic away from 127.0.0.12", i+1, func(l string) bool {
		c := testutil.Counts(l)
		return len(c) == 3 && c["127.0.0.12"] == 0 && c["127.0.0.11"] > 0 && c["127.0.0.13"] > 0
	})

	p.Interrupt()
	if err := p.Wait(t, 20*time.Second); err != nil {
		t.Fatalf("Ctrl-C: %v", err)
	}
	p.Out.Await(t, "the end", 0, func(l string) bool { return strings.HasSuffix(l, "demo finished") })
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("a --dir copy must stay: %v", err)
	}
}

func TestDemoDurationEndsIt(t *testing.T) {
	bin := testutil.BuildCommand(t, "meshpilot-demo")
	p := testutil.Start(t, exec.Command(bin, "--backend-port", strconv.Itoa(grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13")), "--duration", "3s", "--interval", "500ms"))
	if err := p.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	p.Out.Await(t, "a report line", 0, func(l string) bool { return len(testutil.Counts(l)) == 3 })
	p.Out.Await(t, "the end", 0, func(l string) bool { return strings.HasSuffix(l, "demo finished") })
}

func TestDemoPortTaken(t *testing.T) {
	bin := testutil.BuildCommand(t, "meshpilot-demo")
	port := grpctest.FreePort(t, "127.0.0.11", "127.0.0.12", "127.0.0.13")
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.12:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := testutil.Start(t, exec.Command(bin, "--backend-port", strconv.Itoa(port), "--duration", "20s"))
	if err := p.Wait(t, 30*time.Second); err == nil {
		t.Fatal("the demo ran with its port taken")
	}
	p.Out.Await(t, "a clear error", 0, func(l string) bool {
		return strings.HasPrefix(l, "meshpilot-demo: cannot start the demo backend on 127.0.0.12:"+strconv.Itoa(port)) &&
			strings.Contains(l, "--backend-port")
	})
}
