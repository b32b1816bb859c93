package kube

import (
	"fmt"
	"testing"
)

// TestSyncBuildsEachServiceOnce: the services the initial lists bring are
// built once, by the first model, not again by the workers for the
// events those lists queued: at 10 000 services that second build took a
// second of CPU while the first clients converged.
func TestSyncBuildsEachServiceOnce(t *testing.T) {
	ns := env.Namespace(t, nil)
	const n = 12
	for i := range n {
		name := fmt.Sprint("svc-", i)
		mustCreateService(t, ns, name, grpcPort)
		mustCreateSlice(t, slice(ns, name+"-abc", name, 9090, grpcPort.Name, sliceEndpoint{ip: fmt.Sprint("192.0.2.", i+1)}))
	}
	c, rec := startController(t, Options{Namespaces: []string{ns}})
	rec.idle(t)
	if got := c.rebuilds.Load(); got != n {
		t.Fatalf("%d services built %d times in all by the time the queue was idle, want each once", n, got)
	}
	// A change after sync is still built.
	mustCreateService(t, ns, "late", grpcPort)
	rec.point(t)
	if got := c.rebuilds.Load(); got < n+1 {
		t.Fatalf("a service created after sync was not built (%d builds)", got)
	}
}
