package e2e

// The README's commands, run as a user types them from the repository's
// root. Every command README.md shows is either run here (readmeFlows),
// run as written elsewhere (TestDeployManifests, TestDeploySecuredVariant,
// .ci/run), or listed in
// readmeNotRun with the reason; TestEveryReadmeCommandIsTested fails on a
// command that is none of these, so that a new README command needs a
// test.
//
// How a command is typed: bash runs its text exactly as the README writes
// it (comment, continuation lines and redirection included) with the
// meshpilot binary built for the tests first on PATH, for the README's
// "meshpilot ..." commands, as if installed; "go run ./cmd/meshpilot"
// really runs go. KUBECONFIG is unset: a command that needs a cluster
// finds the test API server in ~/.kube/config (kubeHome). Ctrl-C is
// SIGINT to the command's process group, as a terminal sends it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/meshpilot/meshpilot/examples"
	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// readmeFlow runs some of the README's commands, in the order a reader
// would; cmds are the README's, in the order of commands.
type readmeFlow struct {
	name     string
	commands []string // each exactly as the README shows it (ReadmeCommand.Line)
	run      func(t *testing.T, cmds []testutil.ReadmeCommand)
}

var readmeFlows = []readmeFlow{
	{"the demo", []string{"go run ./cmd/meshpilot-demo"}, runDemo},
	{"serve a folder", []string{"go run ./cmd/meshpilot serve --from examples/mesh --xds-addr 127.0.0.1:15010 --http-addr 127.0.0.1:15014"}, runServeFolder},
	{"watch a cluster", []string{"go run ./cmd/meshpilot watch svc,endpointslices -A"}, runWatch},
	{"serve a cluster to a client made with bootstrap", []string{
		"go run ./cmd/meshpilot serve --kubeconfig ~/.kube/config --xds-addr 127.0.0.1:15010 --http-addr 127.0.0.1:15014",
		"meshpilot bootstrap --xds-server meshpilot.istio-system:15010 --namespace shop --pod cart-7d9f --ip 10.0.0.7 > bootstrap.json",
		"GRPC_XDS_BOOTSTRAP=$PWD/bootstrap.json ./my-grpc-client",
		"meshpilot status --server http://127.0.0.1:15014",
	}, runServeClusterToClient},
	{"bootstrap in a deployed client's Pod", []string{"meshpilot bootstrap --xds-server meshpilot.meshpilot-system.svc:15010 > bootstrap.json"}, runBootstrapInPod},
	{"the chart: install, upgrade, uninstall", []string{
		"helm install meshpilot charts/meshpilot -n meshpilot-system --create-namespace",
		"helm upgrade meshpilot charts/meshpilot -n meshpilot-system --reuse-values --set replicas=3 --set balance.enabled=true",
		"helm uninstall meshpilot -n meshpilot-system",
	}, runChartReadme},
	{"benchmarks", []string{"go test -run '^$' -bench . -benchmem ./internal/registry/kube/ ./internal/registry/kubeconv/ ./internal/xds/"}, runBenchmarks},
	{"the dashboard and alerts", observabilityCommands, runObservabilityCommands},
	{"the container image", []string{"hack/image.sh", "IMAGE=$REGISTRY/meshpilot:v0.1.0 VERSION=v0.1.0 hack/image.sh", "podman push $REGISTRY/meshpilot:v0.1.0"}, runImage},
}

// readmeInCI are README commands that .ci/run runs as written (checked).
var readmeInCI = []string{"go test -race -timeout 30m ./..."}

const meshbenchNotRun = "a full meshbench run starts its own API server and writes hundreds to thousands of services for 100 to 1000 clients: minutes of the machine's 2 cores; internal/bench's TestSmallRun runs the same code on a tiny workload"

// readmeNotRun are the README commands that no test runs, and why.
var readmeNotRun = map[string]string{
	"docker build --build-arg VERSION=v0.1.0 -t $REGISTRY/meshpilot:v0.1.0 .":                                                                  "needs a Docker engine, which neither the developers' machines nor CI have; TestImageAgreesWithDockerfile checks that it builds the image hack/image.sh builds, which the flow \"the container image\" checks",
	"go run ./cmd/meshbench --meshpilot-arg=--debounce-after=100ms":                                                                            meshbenchNotRun,
	"go run ./cmd/meshbench --meshpilot-arg=--debounce-after=100ms --meshpilot-arg=--debounce-leading-edge=false":                              meshbenchNotRun,
	"go run ./cmd/meshbench --services 1000 --endpoints 10 --clients 500":                                                                      meshbenchNotRun,
	"go run ./cmd/meshbench --services 10000 --endpoints 10 --clients 1000 --per-client 10 --rate 20 --changes 200 --namespaces 50 --nodes 30": meshbenchNotRun,
	"go run ./cmd/meshbench --traffic-rules":                                                                                                   meshbenchNotRun,
	"go run ./cmd/meshbench --gateway-routes":                                                                                                  meshbenchNotRun,
	"go run ./cmd/meshbench --security-policies":                                                                                               meshbenchNotRun,
	"go run ./cmd/meshbench --services 1000 --endpoints 10 --clients 500 --clusters 2":                                                         meshbenchNotRun,
	"go run ./cmd/meshbench --replicas 3 --clients 300 --changes 0 --plot docs/replica-balance.svg":                                            meshbenchNotRun,
	"go run ./cmd/meshbench --soak 30m --plot docs/soak.svg":                                                                                   meshbenchNotRun,
	"go run ./cmd/meshbench --clients 10000":                                                                                                   meshbenchNotRun,
	"go run ./cmd/meshbench --pods=false --headless --services 50000 --endpoints 10 --clients 1000 --per-client 10 --rate 20 --changes 200 --namespaces 250 --nodes 150": meshbenchNotRun,
	"go run ./cmd/istioparity":             "builds istiod's pilot-discovery (about 8 minutes on 2 cores) and starts an API server, istiod and meshpilot for each of some 30 cases, about 15 minutes; internal/parity's tests check how it writes cases into a cluster, what it leaves out as intended and how it compares",
	"go run ./cmd/meshbench idle --runs 3": "starts its own API server and meshpilot three times, each with a settle pause; internal/bench's TestIdle runs the same code twice against the package's API server",
	"go run ./cmd/meshbench plot-rss --out docs/rss-services.svg s1000.json s3000.json s10000.json": "reads the --json results of three large meshbench runs, which no test makes; internal/bench's TestRSSPlot draws and checks a plot from results it writes",
}

// TestEveryReadmeCommandIsTested fails on a README command that no test
// runs and that readmeNotRun does not explain, and on a claim about a
// command the README no longer shows.
func TestEveryReadmeCommandIsTested(t *testing.T) {
	claims := map[string][]string{}
	for _, f := range readmeFlows {
		for _, c := range f.commands {
			claims[c] = append(claims[c], "TestReadmeCommands/"+f.name)
		}
	}
	ci := ciScript(t)
	for _, c := range readmeInCI {
		claims[c] = append(claims[c], ".ci/run")
		if !runsAsWritten(ci, c) {
			t.Errorf(".ci/run no longer runs the README's %q as written", c)
		}
	}
	for c, why := range readmeNotRun {
		claims[c] = append(claims[c], "not run: "+why)
	}
	shown := map[string]bool{}
	for _, c := range testutil.ReadmeCommands(t) {
		shown[c.Line] = true
		by := claims[c.Line]
		if isDeployCommand(c) {
			by = append(by, "TestDeployManifests")
		}
		if isSecureDeployCommand(c) {
			by = append(by, "TestDeploySecuredVariant")
		}
		switch len(by) {
		case 0:
			t.Errorf("README.md (%s) shows a command that no test runs:\n\t%s\nrun it in readmeFlows (test/e2e/readme_test.go) or say in readmeNotRun why no test can", c.Section, c.Line)
		case 1:
			t.Logf("%s\n\t%s", c.Line, by[0])
		default:
			t.Errorf("%q is claimed more than once: %v", c.Line, by)
		}
	}
	for c, by := range claims {
		if !shown[c] {
			t.Errorf("%v: README.md no longer shows %q", by, c)
		}
	}
}

func ciScript(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// envAssignments are the "NAME=value " words a shell line may start with.
var envAssignments = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*`)

// runsAsWritten says whether a line of the script is command, possibly
// after environment assignments.
func runsAsWritten(script []string, command string) bool {
	return slices.ContainsFunc(script, func(l string) bool {
		return envAssignments.ReplaceAllString(strings.TrimSpace(l), "") == command
	})
}

// TestReadmeCommands runs readmeFlows, one after the other: several use
// the same fixed ports, the README's.
func TestReadmeCommands(t *testing.T) {
	shown := map[string]testutil.ReadmeCommand{}
	for _, c := range testutil.ReadmeCommands(t) {
		shown[c.Line] = c
	}
	for _, f := range readmeFlows {
		t.Run(f.name, func(t *testing.T) {
			var cmds []testutil.ReadmeCommand
			for _, line := range f.commands {
				c, ok := shown[line]
				if !ok {
					t.Fatalf("README.md no longer shows %q", line)
				}
				cmds = append(cmds, c)
			}
			f.run(t, cmds)
		})
	}
}

// The addresses the README's serve commands listen on.
const (
	readmeXDSAddr  = "127.0.0.1:15010"
	readmeHTTPAddr = "127.0.0.1:15014"
)

// exampleBackends are the endpoints of the bundled examples/mesh, where
// the demo starts its backends.
var exampleBackends = []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}

func exampleBackendAddrs() []string {
	var addrs []string
	for _, ip := range exampleBackends {
		addrs = append(addrs, net.JoinHostPort(ip, fmt.Sprint(examples.BackendPort)))
	}
	return addrs
}

// startReadme starts a README command as typed in dir (see the top of
// this file), with env added to the environment.
func startReadme(t *testing.T, c testutil.ReadmeCommand, dir string, env ...string) *testutil.Process {
	t.Helper()
	bin := testutil.BuildMeshpilot(t)
	cmd := exec.Command("bash", "-c", c.Text)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	prebuild(t, c, dir, cmd.Env)
	t.Logf("%s$ %s", dir, c.Text)
	return testutil.Start(t, cmd)
}

// prebuild builds the program of a "go run" command first, bounded by the
// test's deadline alone, with "go run -exec true": go run keeps the
// executables it builds in go's cache, so the command as written then
// finds its program built and starts it at once. The waits on what the
// command does thus time the program, never a build, which takes minutes
// on a busy machine.
func prebuild(t *testing.T, c testutil.ReadmeCommand, dir string, env []string) {
	t.Helper()
	f := strings.Fields(c.Line)
	if len(f) < 3 || f[0] != "go" || f[1] != "run" || strings.HasPrefix(f[2], "-") {
		return
	}
	cmd := exec.CommandContext(testutil.Context(t), "go", "run", "-exec", "true", f[2])
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s for %q: %v\n%s", f[2], c.Line, err, out)
	}
}

// runReadme runs a README command to its end and returns its output; it
// fails the test unless the command exits 0 within the time given.
func runReadme(t *testing.T, c testutil.ReadmeCommand, dir string, within time.Duration, env ...string) string {
	t.Helper()
	p := startReadme(t, c, dir, env...)
	if err := p.Wait(t, within); err != nil {
		t.Fatalf("%s: %v\n%s", c.Line, err, p.Out.String())
	}
	return p.Out.String()
}

// goRunFailed matches what "go run" prints when its program failed.
var goRunFailed = regexp.MustCompile(`(?m)^(exit status \d+|signal: .+)$`)

// interrupt ends a README command with Ctrl-C and fails the test unless
// its program ended cleanly. "go run" may exit 1 after Ctrl-C whatever
// its program did (the go command counts an interrupted run as failed),
// and reports a program that failed as "exit status N" or "signal: ...":
// for it a clean end is exit code 0 or 1 without such a line.
func interrupt(t *testing.T, c testutil.ReadmeCommand, p *testutil.Process) {
	t.Helper()
	p.Interrupt()
	err := p.Wait(t, 30*time.Second)
	if strings.HasPrefix(c.Line, "go run ") {
		if (err != nil && p.ExitCode() != 1) || goRunFailed.MatchString(p.Out.String()) {
			t.Fatalf("%s did not end cleanly on Ctrl-C: %v\n%s", c.Line, err, p.Out.String())
		}
		return
	}
	if err != nil {
		t.Fatalf("%s did not end cleanly on Ctrl-C: %v\n%s", c.Line, err, p.Out.String())
	}
}

// requireFree fails at once when an address a README command listens on
// is taken, rather than letting the command fail obscurely.
func requireFree(t *testing.T, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is taken (%v): the README's commands listen there; stop what holds it and run the test again", a, err)
		}
		l.Close()
	}
}

// kubeHome returns the environment of a user whose ~/.kube/config is the
// test API server's: HOME is a new folder that holds it. Go's own folders
// are passed as they are, since under the new HOME "go run" would find an
// empty build and module cache.
func kubeHome(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	vars := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}
	out, err := exec.Command("go", append([]string{"env"}, vars...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(values) != len(vars) {
		t.Fatalf("go env %v printed %q", vars, out)
	}
	envs := []string{"HOME=" + home}
	for i, v := range vars {
		envs = append(envs, v+"="+values[i])
	}
	return envs
}

// runDemo: the demo, as written, spreads traffic over the three backends
// and ends cleanly on Ctrl-C.
func runDemo(t *testing.T, cmds []testutil.ReadmeCommand) {
	demo := cmds[0]
	requireFree(t, exampleBackendAddrs()...)
	p := startReadme(t, demo, testutil.RepoRoot(t))
	p.Out.Await(t, "traffic on all three backends", 0, func(l string) bool {
		c := testutil.Counts(l)
		return c[exampleBackends[0]] > 0 && c[exampleBackends[1]] > 0 && c[exampleBackends[2]] > 0
	})
	interrupt(t, demo, p)
	p.Out.Await(t, "the demo's end", 0, func(l string) bool { return strings.HasSuffix(l, "demo finished") })
}

// runServeFolder: meshpilot serves examples/mesh, and a grpc-go client
// reaches the example's endpoints, where the test runs gRPC servers.
func runServeFolder(t *testing.T, cmds []testutil.ReadmeCommand) {
	serve := cmds[0]
	requireFree(t, readmeXDSAddr, readmeHTTPAddr)
	requireFree(t, exampleBackendAddrs()...)
	var bs []grpctest.Backend
	for _, ip := range exampleBackends {
		bs = append(bs, grpctest.StartBackend(t, ip, examples.BackendPort))
	}
	p := startReadme(t, serve, testutil.RepoRoot(t))
	testutil.AwaitHTTP(t, "http://"+readmeHTTPAddr+"/readyz", http.StatusOK)
	target := fmt.Sprintf("xds:///%s.%s.svc.cluster.local:%d", examples.GreeterService, examples.MeshNamespace, examples.GreeterPort)
	cc := grpctest.Channel(t, readmeXDSAddr, target, grpctest.ChannelOptions{Namespace: examples.MeshNamespace})
	grpctest.AwaitSpread(t, cc, bs...)
	// Without open streams the drain that Ctrl-C starts ends at once.
	cc.Close()
	interrupt(t, serve, p)
}

// runWatch: the watcher lists what exists, then prints the events of a
// Service and its EndpointSlice created afterwards, and ends on Ctrl-C.
func runWatch(t *testing.T, cmds []testutil.ReadmeCommand) {
	watch := cmds[0]
	p := startReadme(t, watch, testutil.RepoRoot(t), kubeHome(t)...)
	event := func(typ, kind, id string) func(string) bool {
		return func(l string) bool {
			f := strings.Fields(l)
			return len(f) > 3 && f[1] == typ && f[2] == kind && f[3] == id
		}
	}
	p.Out.Await(t, "the API server's own Service, listed first", 0, event("ADDED", "Service", "default/kubernetes"))
	ns := env.Namespace(t, nil)
	createService(t, ns, "watched", 7070)
	writeSlice(t, ns, "watched", []grpctest.Backend{{IP: "127.0.0.90", Port: 7070}})
	p.Out.Await(t, "the new Service", 0, event("ADDED", "Service", ns+"/watched"))
	p.Out.Await(t, "its EndpointSlice", 0, event("ADDED", "EndpointSlice", ns+"/watched-slice"))
	interrupt(t, watch, p)
}

// The README's bootstrap example: its xDS server and its workload.
const (
	readmeXDSHost     = "meshpilot.istio-system"
	readmeClientNode  = "sidecar~10.0.0.7~cart-7d9f.shop~shop.svc.cluster.local"
	readmeClientNS    = "shop"
	readmeClientDials = "xds:///cart:8080"
)

// runServeClusterToClient is the README's story for a cluster: meshpilot
// serves it, "meshpilot bootstrap" writes bootstrap.json, the user's
// client reads it through GRPC_XDS_BOOTSTRAP and its RPCs reach the
// service's endpoints, and "meshpilot status" lists the client, synced.
func runServeClusterToClient(t *testing.T, cmds []testutil.ReadmeCommand) {
	serve, bootstrap, client, status := cmds[0], cmds[1], cmds[2], cmds[3]
	bs := grpctest.StartBackends(t, "127.0.0.81", "127.0.0.82")
	ensureNamespace(t, readmeClientNS)
	ensureService(t, readmeClientNS, "cart", 8080)
	writeSlice(t, readmeClientNS, "cart", bs)

	requireFree(t, readmeXDSAddr, readmeHTTPAddr)
	mp := startReadme(t, serve, testutil.RepoRoot(t), kubeHome(t)...)
	testutil.AwaitHTTP(t, "http://"+readmeHTTPAddr+"/readyz", http.StatusOK)

	work := t.TempDir()
	runReadme(t, bootstrap, work, 30*time.Second)
	doc := readBootstrap(t, work)
	if doc.server != readmeXDSHost+":15010" || doc.node != readmeClientNode {
		t.Fatalf("bootstrap.json: xDS server %q, node %q; want %s:15010, %s", doc.server, doc.node, readmeXDSHost, readmeClientNode)
	}

	// The user's client is this test binary under the README's name.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(work, myGRPCClient)); err != nil {
		t.Fatal(err)
	}
	cl := startReadme(t, client, work)
	for _, b := range bs {
		cl.Out.Await(t, "an RPC served by "+b.Addr, 0, func(l string) bool { return l == "served by "+b.Addr })
	}

	awaitStatusSynced(t, status)
	interrupt(t, client, cl)
	interrupt(t, serve, mp)
}

// awaitStatusSynced runs the README's status command until it lists the
// README's client with every type SYNCED and no NACK.
func awaitStatusSynced(t *testing.T, status testutil.ReadmeCommand) {
	t.Helper()
	deadline := time.Now().Add(testutil.Wait)
	for {
		out := runReadme(t, status, testutil.RepoRoot(t), 30*time.Second)
		for l := range strings.SplitSeq(out, "\n") {
			f := strings.Fields(l)
			if len(f) >= 8 && f[0] == readmeClientNode && f[1] == readmeClientNS && f[2] == "grpc" &&
				slices.Equal(f[3:8], []string{"SYNCED", "SYNCED", "SYNCED", "SYNCED", "0"}) {
				t.Logf("%s\n%s", status.Line, out)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listed %s with every type SYNCED:\n%s", status.Line, readmeClientNode, out)
		}
		time.Sleep(50 * time.Millisecond) // between polls
	}
}

// runBootstrapInPod: in a client's Pod, where the downward API sets
// POD_NAME, POD_NAMESPACE and INSTANCE_IP, the README's command writes a
// bootstrap that grpc-go accepts, for the workload, pointing at the
// Service that deploy/ creates.
func runBootstrapInPod(t *testing.T, cmds []testutil.ReadmeCommand) {
	work := t.TempDir()
	runReadme(t, cmds[0], work, 30*time.Second, "POD_NAME=cart-7d9f", "POD_NAMESPACE=shop", "INSTANCE_IP=10.0.0.7")
	doc := readBootstrap(t, work)
	if want := deployedXDSServer(t); doc.server != want {
		t.Errorf("bootstrap.json's xDS server is %q; deploy/'s Service is %q", doc.server, want)
	}
	if doc.node != readmeClientNode {
		t.Errorf("bootstrap.json's node is %q, want %q from the Pod's environment", doc.node, readmeClientNode)
	}
	if _, err := xds.NewXDSResolverWithConfigForTesting(doc.raw); err != nil {
		t.Errorf("grpc-go refuses bootstrap.json: %v", err)
	}
}

// deployedXDSServer is the in-cluster address of deploy/'s Service port
// grpc-xds.
func deployedXDSServer(t *testing.T) string {
	t.Helper()
	for _, u := range readManifests(t) {
		if u.GetKind() != "Service" {
			continue
		}
		ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
		for _, p := range ports {
			if p, ok := p.(map[string]any); ok && p["name"] == "grpc-xds" {
				return fmt.Sprintf("%s.%s.svc:%v", u.GetName(), u.GetNamespace(), p["port"])
			}
		}
	}
	t.Fatal("deploy/ has no Service with a port grpc-xds")
	return ""
}

type bootstrapDoc struct {
	server, node string
	raw          []byte
}

func readBootstrap(t *testing.T, dir string) bootstrapDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XDSServers []struct {
			ServerURI string `json:"server_uri"`
		} `json:"xds_servers"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.XDSServers) != 1 {
		t.Fatalf("bootstrap.json (%v):\n%s", err, data)
	}
	return bootstrapDoc{server: doc.XDSServers[0].ServerURI, node: doc.Node.ID, raw: data}
}

// runBenchmarks runs the README's benchmark command as written, with
// GOFLAGS=-benchtime=1x added to the environment: one iteration of each
// benchmark shows that the command and every benchmark work; the figures
// are not the test's business.
func runBenchmarks(t *testing.T, cmds []testutil.ReadmeCommand) {
	bench := cmds[0]
	// go test builds three test binaries first: the test's deadline alone
	// bounds the command.
	out := runReadme(t, bench, testutil.RepoRoot(t), testutil.UntilDeadline(t), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -benchtime=1x"))
	for _, arg := range strings.Fields(bench.Line) {
		if !strings.HasPrefix(arg, "./") {
			continue
		}
		pkg := "github.com/meshpilot/meshpilot/" + strings.Trim(arg, "./")
		if !regexp.MustCompile(`(?m)^ok\s+` + regexp.QuoteMeta(pkg) + `\s`).MatchString(out) {
			t.Errorf("%s did not pass:\n%s", pkg, out)
		}
	}
	if !strings.Contains(out, "\nBenchmark") {
		t.Errorf("no benchmark ran:\n%s", out)
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx(t), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func ensureService(t *testing.T, ns, name string, port int32) {
	t.Helper()
	if _, err := env.Client.CoreV1().Services(ns).Get(ctx(t), name, metav1.GetOptions{}); err == nil {
		return
	}
	createService(t, ns, name, port)
}

// myGRPCClient is the name of the user's client in the README
// ("GRPC_XDS_BOOTSTRAP=$PWD/bootstrap.json ./my-grpc-client"): this test
// binary is that client when started under that name (TestMain).
const myGRPCClient = "my-grpc-client"

// runMyGRPCClient is the README's ./my-grpc-client: a proxyless grpc-go
// client of xds:///cart:8080, configured as any grpc-go client is, by the
// file GRPC_XDS_BOOTSTRAP names. Two things stand in for the cluster it
// would run in: clusterDNS for the cluster's DNS, and the mapping of the
// slices' documentation addresses to loopback for Pod addresses, as in
// every test of this package. It prints the backend of each RPC, or its
// error, until interrupted, and gives up after two minutes.
func runMyGRPCClient() int {
	resolver.Register(clusterDNS{})
	interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, 2*time.Minute)
	defer cancel()
	cc, err := grpc.NewClient(readmeClientDials, grpc.WithTransportCredentials(insecure.NewCredentials()), grpctest.DialMapped(grpctest.DocToLoopback))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cc.Close()
	for ctx.Err() == nil {
		if addr, err := grpctest.Call(ctx, cc); err != nil {
			fmt.Println("error:", err)
		} else {
			fmt.Println("served by", addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // between RPCs
		}
	}
	if interrupted.Err() == nil {
		fmt.Fprintln(os.Stderr, "my-grpc-client: not interrupted within 2 minutes")
		return 1
	}
	return 0
}

// clusterDNS replaces grpc-go's dns resolver in the client: it resolves
// the README's xDS server name to loopback, where the README's serve
// command listens, and no other name.
type clusterDNS struct{}

func (clusterDNS) Scheme() string { return "dns" }

func (clusterDNS) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	host, port, err := net.SplitHostPort(target.Endpoint())
	if err != nil || host != readmeXDSHost {
		return nil, errors.New("the test's cluster DNS resolves only " + readmeXDSHost + ", not " + target.Endpoint())
	}
	if err := cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: net.JoinHostPort("127.0.0.1", port)}}}); err != nil {
		return nil, err
	}
	return clusterDNS{}, nil
}

func (clusterDNS) ResolveNow(resolver.ResolveNowOptions) {}
func (clusterDNS) Close()                                {}
