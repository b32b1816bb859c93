// Package testenv runs a real etcd and kube-apiserver for meshpilot's tests.
//
// The binaries are built from tools/kube on first use (kubectl from
// tools/kubectl, for the tests that ask for it), into a cache folder
// outside the repository, under a file lock so that test packages running
// in parallel build them once. A test package starts one API server in its
// TestMain (see Main) and gives each test its own namespace.
//
// Nothing here skips: when the binaries cannot be built or the API server
// cannot start, the test binary fails.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// ServiceCIDR is larger than envtest's default /24 so that scale tests can
// create thousands of ClusterIP services. The range is only allocated from,
// never routed.
const ServiceCIDR = "10.96.0.0/12"

// EtcdQuotaBytes is etcd's --quota-backend-bytes.
const EtcdQuotaBytes = 8 << 30

// Env is a running etcd and kube-apiserver.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// API is meshpilot's narrow client (internal/kubeapi) built from
	// Config, what its registries take.
	API *kubeapi.Client
	// Kubeconfig is the path of a kubeconfig file for Config, for tests
	// that run meshpilot as a command.
	Kubeconfig string

	env     *envtest.Environment
	workDir string
	nsSeq   atomic.Int64
}

// Assets builds kube-apiserver and etcd if needed and returns the folder
// that holds them.
func Assets() (string, error) {
	return buildTools(filepath.Join("tools", "kube", "build.sh"), "kube-apiserver", "etcd")
}

// Kubectl builds kubectl if needed and returns its path, so that tests can
// run the README's kubectl commands as written.
func Kubectl() (string, error) {
	dir, err := buildTools(filepath.Join("tools", "kubectl", "build.sh"), "kubectl")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}

// buildTools runs a build script of the repository (given relative to its
// root) under the cache folder's lock, so that test packages running in
// parallel build once, and returns the folder the script prints last,
// which must hold bins.
func buildTools(script string, bins ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	script = filepath.Join(root, script)
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("testenv: creating the cache folder: %w", err)
	}
	lock := flock.New(filepath.Join(cache, "build.lock"))
	ctx, cancel := buildContext()
	defer cancel()
	if ok, err := lock.TryLockContext(ctx, time.Second); err != nil || !ok {
		return "", fmt.Errorf("testenv: waiting for the lock on %s: %v", lock.Path(), err)
	}
	defer lock.Unlock()

	cmd := exec.CommandContext(ctx, "bash", script)
	// The script's go build runs in its process group, which ends with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testenv: building %s with %s failed: %w\n%s", strings.Join(bins, " and "), script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := lines[len(lines)-1]
	for _, bin := range bins {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("testenv: %s missing after the build: %w", bin, err)
		}
	}
	return dir, nil
}

// started is when this process started, near enough: go test's -timeout
// counts from then.
var started = time.Now()

// buildContext bounds the build of the test binaries by the test run's
// deadline (go test's -timeout, as the test binary's -test.timeout flag
// says), not by a limit of its own: kube-apiserver takes about 5 minutes
// on 2 idle cores and as long as it takes on a busy machine. Outside a
// test binary, or with -timeout 0, nothing bounds it.
func buildContext() (context.Context, context.CancelFunc) {
	if f := flag.Lookup("test.timeout"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok && d > 0 {
				return context.WithDeadline(context.Background(), started.Add(d))
			}
		}
	}
	return context.WithCancel(context.Background())
}

// Options change how the API server runs.
type Options struct {
	// APIServerFlags are extra kube-apiserver flags, without the leading
	// dashes, e.g. {"watch-cache": "false"}.
	APIServerFlags map[string]string
}

// Start builds the binaries if needed and starts etcd and kube-apiserver.
func Start() (*Env, error) { return StartWith(Options{}) }

// quietEnvtest drops envtest's own log lines: controller-runtime prints
// a stack trace when its logger is first used more than 30 s into a
// process without being set, which an API server started late (a second
// cluster) would do.
var quietEnvtest sync.Once

// StartWith is Start with options.
func StartWith(opts Options) (*Env, error) {
	quietEnvtest.Do(func() { ctrllog.SetLogger(ctrllog.Log.WithSink(ctrllog.NullLogSink{})) })
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	workDir, err := os.MkdirTemp("", "meshpilot-testenv-")
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(workDir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 60 * time.Second,
		// kube-apiserver may wait long on SIGTERM for open watches; after
		// this it is killed, which is a fair restart too.
		ControlPlaneStopTimeout: 10 * time.Second,
	}
	// A fixed cert folder lets RestartAPIServer keep the same CA, so that
	// clients made before a restart still trust the server after it.
	api := e.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	api.Configure().Set("service-cluster-ip-range", ServiceCIDR)
	// etcd refuses writes once its database passes the quota, 2 GiB by
	// default: a benchmark of 50 000 services with 500 000 Pods, each
	// written twice before the API server compacts the first revision,
	// passes it. 8 GiB is etcd's largest recommended quota and what large
	// clusters run with; a limit, not an allocation.
	e.ControlPlane.Etcd = &envtest.Etcd{}
	e.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(EtcdQuotaBytes))
	for k, v := range opts.APIServerFlags {
		api.Configure().Set(k, v)
	}

	cfg, err := e.Start()
	if err != nil {
		os.RemoveAll(workDir)
		return nil, fmt.Errorf("testenv: starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	env := &Env{Config: cfg, env: e, workDir: workDir}
	if env.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		env.Stop()
		return nil, err
	}
	if env.API, err = kubeapi.NewForConfig(cfg); err != nil {
		env.Stop()
		return nil, err
	}
	user, err := e.AddUser(envtest.User{Name: "meshpilot-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		env.Stop()
		return nil, fmt.Errorf("testenv: adding a user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		env.Stop()
		return nil, err
	}
	env.Kubeconfig = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(env.Kubeconfig, kc, 0o600); err != nil {
		env.Stop()
		return nil, err
	}
	return env, nil
}

// Stop stops the API server and etcd and removes their files.
func (e *Env) Stop() error {
	err := e.env.Stop()
	os.RemoveAll(e.workDir)
	return err
}

// StopAPIServer stops the API server alone; etcd keeps the data. An API
// server that does not stop in time is killed and waited for.
func (e *Env) StopAPIServer() error {
	api := e.env.ControlPlane.GetAPIServer()
	err := api.Stop()
	if err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return err
	}
	addr := net.JoinHostPort(api.SecureServing.Address, api.SecureServing.Port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("testenv: kube-apiserver still listening on %s after stop", addr)
}

// StartAPIServer starts a stopped API server again on the same address,
// with the same certificates, and waits until it is healthy.
func (e *Env) StartAPIServer() error {
	return e.env.ControlPlane.GetAPIServer().Start()
}

// Namespace creates a namespace with a unique name for one test and
// returns its name. Namespaces are not removed: without a controller
// manager they would stay Terminating anyway.
func (e *Env) Namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", sanitize(t.Name()), e.nsSeq.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// Main is the body of a TestMain that needs an API server: it starts one,
// stores it in *env, runs the tests and stops it. A failure to start fails
// the package.
func Main(m *testing.M, env **Env) {
	os.Exit(run(m, env))
}

func run(m *testing.M, env **Env) int {
	// A fuzz worker runs only the fuzz target it is handed, and fuzz
	// targets need no API server: one per worker would cost seconds and
	// memory for nothing.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return m.Run()
	}
	start := time.Now()
	e, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the real kube-apiserver and etcd are required and could not start: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testenv: kube-apiserver at %s ready in %s\n", e.Config.Host, time.Since(start).Round(time.Millisecond))
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
	}
	return code
}

// sanitize turns a test name into a DNS label prefix.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	if s == "" {
		s = "test"
	}
	return s
}

func cacheDir() (string, error) {
	if d := os.Getenv("MESHPILOT_KUBE_ASSETS"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("testenv: no cache folder: set MESHPILOT_KUBE_ASSETS or HOME: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "meshpilot"), nil
}

// RepoRoot finds the repository from this source file, so tests work from
// any package folder.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testenv: cannot locate the repository")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "kube", "build.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: tools/kube/build.sh not found above %s", filepath.Dir(file))
		}
		dir = parent
	}
}
