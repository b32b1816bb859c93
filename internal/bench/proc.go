package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// freeAddr returns a loopback address whose port is free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// process is meshpilot running as a child process.
type process struct {
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{}
	waitErr error

	sampleStop chan struct{}
	sampleDone chan struct{}
	mu         sync.Mutex // guards peak
	peak       Usage      // the sample of highest VmRSS
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	return startProcessEnv(bin, args, nil, logPath)
}

// startProcessEnv is startProcess with env added to the benchmark's own
// environment (a replica's POD_NAME, say).
func startProcessEnv(bin string, args, env []string, logPath string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: Ctrl-C reaches the benchmark, which stops
	// meshpilot itself; and meshpilot dies with the benchmark.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, logFile: f, exited: make(chan struct{}),
		sampleStop: make(chan struct{}), sampleDone: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.sample(100 * time.Millisecond)
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// sample reads VmRSS every interval and keeps the highest.
func (p *process) sample(interval time.Duration) {
	defer close(p.sampleDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if u, err := readUsage(p.pid()); err == nil {
			p.mu.Lock()
			if u.RSS > p.peak.RSS {
				p.peak = u
			}
			p.mu.Unlock()
		}
		select {
		case <-p.sampleStop:
			return
		case <-p.exited:
			return
		case <-t.C:
		}
	}
}

func (p *process) sampledPeakRSS() int64 { return p.sampledPeak().RSS }

// sampledPeak is the sample of highest RSS so far, with its anon and file
// split.
func (p *process) sampledPeak() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// awaitReady polls url until it answers 200, the process exits or ctx ends.
// awaitListening waits until url answers at all, whatever its status.
func (p *process) awaitListening(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("meshpilot exited before it listened (%v); its log:\n%s", p.waitErr, p.tail(20))
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (p *process) awaitReady(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("meshpilot exited before it was ready (%v); its log:\n%s", p.waitErr, p.tail(20))
		case <-ctx.Done():
			return fmt.Errorf("meshpilot not ready at %s: %s: %w", url, last, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, waits up to grace, then kills. It returns an error
// when meshpilot had already exited or did not exit cleanly.
func (p *process) stop(grace time.Duration) error {
	defer p.logFile.Close()
	select {
	case <-p.exited:
		return fmt.Errorf("meshpilot exited early: %v", p.waitErr)
	default:
	}
	close(p.sampleStop)
	<-p.sampleDone
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		var ee *exec.ExitError
		if p.waitErr != nil && !(errors.As(p.waitErr, &ee) && ee.ExitCode() == 0) {
			return fmt.Errorf("meshpilot exited with %v on SIGTERM", p.waitErr)
		}
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("meshpilot did not stop within %s of SIGTERM; killed", grace)
	}
}

func (p *process) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("meshpilot exited (%v); its log:\n%s", p.waitErr, p.tail(20))
	default:
		return nil
	}
}

// tail returns the last n lines of the log.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Usage is what /proc says about a process at one moment.
type Usage struct {
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSS is the resident set now (VmRSS), HWM its peak so far (VmHWM),
	// in bytes.
	RSS int64 `json:"rss_bytes"`
	HWM int64 `json:"hwm_bytes"`
	// RSSAnon and RSSFile split RSS into heap and stacks versus mapped
	// files (mostly the binary's own text).
	RSSAnon int64 `json:"rss_anon_bytes"`
	RSSFile int64 `json:"rss_file_bytes"`
	// Threads is the number of OS threads.
	Threads int `json:"threads"`
}

func readUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which may hold spaces, in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return u, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return u, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, err
	}
	u.CPUSeconds = float64(utime+stime) / clockTicks

	sf, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer sf.Close()
	sc := bufio.NewScanner(sf)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			u.RSS = n * 1024
		case "VmHWM":
			u.HWM = n * 1024
		case "RssAnon":
			u.RSSAnon = n * 1024
		case "RssFile":
			u.RSSFile = n * 1024
		case "Threads":
			u.Threads = int(n)
		}
	}
	return u, sc.Err()
}

// profiler fetches Go profiles from meshpilot's /debug/pprof/ into a
// folder. Failures are reported, not fatal: older builds serve no pprof.
type profiler struct {
	base string // "http://host:port"
	dir  string
	logf func(string, ...any)
}

// debugAddr is where meshpilot serves /debug/: --debug-addr when the
// arguments set it, else the HTTP address.
func debugAddr(args []string, httpAddr string) string {
	return argValue(args, "debug-addr", httpAddr)
}

// fetch saves /debug/pprof/<path> as file.
func (p *profiler) fetch(ctx context.Context, path, file string) {
	if p == nil {
		return
	}
	if err := p.get(ctx, path, filepath.Join(p.dir, file)); err != nil {
		p.logf("profile %s: %v", file, err)
		return
	}
	p.logf("profile saved: %s", filepath.Join(p.dir, file))
}

// cpu profiles meshpilot for d, and meshbench itself, in the
// background; the function returned waits for both.
func (p *profiler) cpu(ctx context.Context, d time.Duration, file string) (wait func()) {
	if p == nil {
		return func() {}
	}
	stopSelf := p.selfCPU("meshbench-" + file)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", max(1, int(d.Seconds()+0.999))), file)
	}()
	return func() { <-done; stopSelf() }
}

func (p *profiler) get(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s (does this meshpilot serve pprof?)", req.URL, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
