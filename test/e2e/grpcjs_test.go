package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// grpcjsDir holds the grpc-js xDS client script and its npm packages,
// pinned by package-lock.json; node_modules is not in the repository.
var grpcjsDir = filepath.Join("testdata", "grpcjs")

var (
	grpcjsOnce sync.Once
	grpcjsErr  error
)

// installGrpcJS installs the client's packages with npm ci unless the
// pinned versions are there already (.ci/run installs them first). Missing
// Node.js or npm fails the test: the client is part of what is tested.
func installGrpcJS(t *testing.T) {
	t.Helper()
	grpcjsOnce.Do(func() {
		if grpcjsInstalled() {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = grpcjsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			grpcjsErr = fmt.Errorf("npm ci in %s: %w\n%s", grpcjsDir, err, out)
			return
		}
		if !grpcjsInstalled() {
			grpcjsErr = fmt.Errorf("npm ci in %s did not install the pinned versions", grpcjsDir)
		}
	})
	if grpcjsErr != nil {
		t.Fatalf("the grpc-js client needs Node.js and npm: %v", grpcjsErr)
	}
}

// grpcjsInstalled tells whether node_modules holds every dependency of
// package.json at its pinned version.
func grpcjsInstalled() bool {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if readJSON(filepath.Join(grpcjsDir, "package.json"), &pkg) != nil {
		return false
	}
	for name, version := range pkg.Dependencies {
		var dep struct {
			Version string `json:"version"`
		}
		if readJSON(filepath.Join(grpcjsDir, "node_modules", name, "package.json"), &dep) != nil || dep.Version != version {
			return false
		}
	}
	return true
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// startGrpcJS runs the grpc-js client on targets with the bootstrap that
// `meshpilot bootstrap` prints for a workload in namespace ns, until the
// test ends; its report lines are returned.
func startGrpcJS(t *testing.T, xdsAddr, ns string, targets ...string) *testutil.Lines {
	t.Helper()
	installGrpcJS(t)
	bootstrap, code := runProcess(t, testutil.BuildMeshpilot(t), nil,
		"bootstrap", "--xds-server", xdsAddr, "--namespace", ns, "--pod", "grpcjs-client", "--ip", "127.0.0.1")
	if code != 0 {
		t.Fatalf("meshpilot bootstrap exited %d:\n%s", code, bootstrap)
	}
	script, err := filepath.Abs(filepath.Join(grpcjsDir, "client.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{script}, targets...)...)
	cmd.Dir = grpcjsDir
	cmd.Env = append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+writeFile(t, "bootstrap.json", bootstrap))
	out := testutil.NewLines()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the grpc-js client: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("bootstrap:\n%s\ngrpc-js client output:\n%s", bootstrap, out.String())
		}
	})
	return out
}

var failedRE = regexp.MustCompile(`  failed: (\d+)`)

// awaitJSSpread waits for a report line of target, from line from on, of
// a round without failures served by exactly the backends want, and
// returns its index.
func awaitJSSpread(t *testing.T, out *testutil.Lines, from int, target string, want ...grpctest.Backend) int {
	t.Helper()
	var ips []string
	for _, b := range want {
		ips = append(ips, b.IP)
	}
	slices.Sort(ips)
	return out.Await(t, target+" served by exactly "+strings.Join(ips, ", "), from, func(l string) bool {
		f := failedRE.FindStringSubmatch(l)
		return strings.HasPrefix(l, target+"  ") && f != nil && f[1] == "0" &&
			slices.Equal(slices.Sorted(maps.Keys(testutil.Counts(l))), ips)
	})
}

// TestGrpcJSClientFollowsKubernetes: grpc-js, an xDS client that is not
// grpc-go, configured by `meshpilot bootstrap`, spreads RPCs over the
// ready endpoints, leaves an endpoint marked not ready, and resolves the
// short names relative to its namespace.
func TestGrpcJSClientFollowsKubernetes(t *testing.T) {
	ns := env.Namespace(t, nil)
	bs := grpctest.StartBackends(t, "127.0.0.51", "127.0.0.52", "127.0.0.53")
	createService(t, ns, "echo", 7070)
	writeSlice(t, ns, "echo", bs)
	srv := startMeshpilot(t, ns)

	// One client in another namespace names the service fully or by
	// name.namespace; one in the service's namespace by its name alone.
	qualified := []string{"xds:///echo." + ns + ".svc.cluster.local:7070", "xds:///echo." + ns + ":7070", "xds:///echo." + ns + ".svc:7070"}
	short := "xds:///echo:7070"
	other := startGrpcJS(t, srv.XDSAddr(), "other", qualified...)
	same := startGrpcJS(t, srv.XDSAddr(), ns, short)
	from := map[string]int{} // the first line of each target not yet read
	awaitAll := func(t *testing.T, want ...grpctest.Backend) {
		t.Helper()
		for _, target := range qualified {
			from[target] = awaitJSSpread(t, other, from[target], target, want...) + 1
		}
		from[short] = awaitJSSpread(t, same, from[short], short, want...) + 1
	}

	t.Run("RPCs spread over all ready endpoints, by every name", func(t *testing.T) {
		awaitAll(t, bs...)
	})
	t.Run("a not-ready endpoint stops receiving RPCs", func(t *testing.T) {
		writeSlice(t, ns, "echo", bs, bs[1])
		awaitAll(t, bs[0], bs[2])
		writeSlice(t, ns, "echo", bs)
		awaitAll(t, bs...)
	})
	if n := srv.XDS().NACKs(); n != 0 {
		t.Fatalf("the grpc-js clients sent %d NACKs", n)
	}
}
