package quickstart

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/grpctest"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
	"github.com/meshpilot/meshpilot/internal/xdstest"
)

// reviewsMesh is a namespace "files" with a service reviews (port 9080)
// and three Pods behind it: one of version v1, two of version v2.
const reviewsMesh = `apiVersion: v1
kind: Namespace
metadata: {name: files}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: files}
spec:
  ports: [{name: grpc, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-a, namespace: files, labels: {app: reviews, version: v1}}
status: {podIP: 127.0.0.51}
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-b, namespace: files, labels: {app: reviews, version: v2}}
status: {podIP: 127.0.0.52}
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-c, namespace: files, labels: {app: reviews, version: v2}}
status: {podIP: 127.0.0.53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: reviews-1, namespace: files, labels: {kubernetes.io/service-name: reviews}}
addressType: IPv4
ports: [{name: grpc, port: 9080}]
endpoints:
- {addresses: [127.0.0.51], targetRef: {kind: Pod, name: reviews-a}}
- {addresses: [127.0.0.52], targetRef: {kind: Pod, name: reviews-b}}
- {addresses: [127.0.0.53], targetRef: {kind: Pod, name: reviews-c}}
`

// reviewsRule is a DestinationRule for reviews with subsets v1 and v2.
const reviewsRule = `# subsets by version
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: files}
spec:
  host: reviews
  trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`

// TestServeFromAFolderWithDestinationRule: "meshpilot serve --from" with
// a DestinationRule in the folder serves its subset clusters and their
// label-selected endpoints to an xDS client; an edit of the rule is
// pushed; a broken edit keeps the last good rule; and a rule meshpilot
// refuses is reported by "meshpilot status config" with its file, line
// and document.
func TestServeFromAFolderWithDestinationRule(t *testing.T) {
	bin := testutil.BuildMeshpilot(t)
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("reviews.yaml", reviewsMesh)
	write("reviews-rule.yaml", reviewsRule)
	xdsAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	p := start(t, bin, "serve", "--from", dir, "--xds-addr", xdsAddr, "--http-addr", httpAddr)
	testutil.AwaitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK)

	host := model.ServiceHostname("reviews", "files", "")
	v1, v2 := model.ClusterName(9080, "v1", host), model.ClusterName(9080, "v2", host)
	c := xdstest.Dial(t, xdsAddr, xdstest.Options{Node: xdstest.GRPCNode(xdstest.NodeOptions{ID: "client", Namespace: "files"}), AutoACK: true, Wait: grpctest.Wait})
	c.Subscribe(resource.ClusterType, v1, v2)
	c.Subscribe(resource.EndpointType, v1, v2)
	holds := func(name string, lb string, addrs ...string) {
		t.Helper()
		c.WaitUntil(name+" with "+lb+" and "+strings.Join(addrs, ","), func() bool {
			return c.Cluster(name).GetLbPolicy().String() == lb && slices.Equal(xdstest.Addresses(c.LoadAssignment(name)), addrs)
		})
	}
	holds(v1, "LEAST_REQUEST", "127.0.0.51")
	holds(v2, "LEAST_REQUEST", "127.0.0.52", "127.0.0.53")

	// An edit as a user saves it: v2 now selects the v1 Pod too, and the
	// load balancer is round robin.
	write("reviews-rule.yaml", strings.NewReplacer("LEAST_REQUEST", "ROUND_ROBIN", "{version: v2}", "{app: reviews}").Replace(reviewsRule))
	holds(v2, "ROUND_ROBIN", "127.0.0.51", "127.0.0.52", "127.0.0.53")
	holds(v1, "ROUND_ROBIN", "127.0.0.51")

	// A broken edit is logged with its place; the last good rule stays.
	write("reviews-rule.yaml", strings.Replace(reviewsRule, "subsets:", "subsetz:", 1))
	p.Out.Await(t, "the broken rule reported", 0, func(l string) bool {
		return strings.Contains(l, "reviews-rule.yaml") && strings.Contains(l, "line=2") && strings.Contains(l, "spec.subsetz")
	})
	holds(v2, "ROUND_ROBIN", "127.0.0.51", "127.0.0.52", "127.0.0.53")

	// A rule the API server would store but meshpilot refuses: status
	// config names it with where it was read.
	write("wildcard.yaml", "---\n"+strings.NewReplacer("name: reviews,", "name: wild,", "host: reviews", `host: "reviews.*.example.com"`).Replace(reviewsRule))
	want := "(DestinationRule files/wild " + filepath.Join(dir, "wildcard.yaml") + ":3 (document 1)) spec.host:"
	testenv.Eventually(t, "status config reporting the wildcard rule", func() (bool, string) {
		out, err := exec.Command(bin, "status", "--server", "http://"+httpAddr, "config").Output()
		var exit *exec.ExitError
		return errors.As(err, &exit) && exit.ExitCode() == 79 && strings.Contains(string(out), want), string(out)
	})
}
