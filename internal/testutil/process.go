package testutil

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Process is a command running in the background in a process group of
// its own, as a shell runs a job: a signal reaches the command and every
// process it started (the program that "go run" builds, for instance),
// as Ctrl-C in a terminal does.
type Process struct {
	// Out collects the command's stdout and stderr.
	Out    *Lines
	cmd    *exec.Cmd
	exited chan error
}

// Start starts cmd; its Stdout and Stderr must be unset. If the command
// still runs when the test ends, its process group gets SIGTERM, then
// SIGKILL (after 20 s, which fails the test, or once the command ended).
// Its output is logged when the test failed.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Out: NewLines(), cmd: cmd, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", cmd.Args, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if !p.ended() {
			p.signal(syscall.SIGTERM)
			select {
			case err := <-p.exited:
				p.exited <- err
			case <-time.After(20 * time.Second):
				t.Errorf("%v did not stop on SIGTERM", cmd.Args)
			}
			// Children that outlived the command keep the group, and
			// so its id, alive.
			p.signal(syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", cmd.Args, p.Out.String())
		}
	})
	return p
}

// Interrupt sends SIGINT to the command's process group, as Ctrl-C does.
func (p *Process) Interrupt() { p.signal(syscall.SIGINT) }

func (p *Process) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

func (p *Process) ended() bool {
	select {
	case err := <-p.exited:
		p.exited <- err
		return true
	default:
		return false
	}
}

// Wait waits for the command to end and returns its exit error; it fails
// the test if the command still runs after within.
func (p *Process) Wait(t testing.TB, within time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(within):
		t.Fatalf("%v still running after %v", p.cmd.Args, within)
		return nil
	}
}

// ExitCode is the command's exit code once Wait returned.
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }
