package kube

import (
	"testing"
	"time"
)

// TestInventory: the cluster's Namespaces exist, also one outside
// Options.Namespaces; a node exists once its Node does, or a watched Pod
// is bound to it; the cluster is known only to a remote cluster's
// registry, by its ID.
func TestInventory(t *testing.T) {
	watched, other := env.Namespace(t, nil), env.Namespace(t, nil)
	withNode, podOnly := nodeName(t, "a"), nodeName(t, "b")
	mustCreateNode(t, withNode, nil)
	c, _ := startController(t, Options{Namespaces: []string{watched}, ClusterID: "west"})
	mustCreatePod(t, watched, "p", "10.7.0.1", podOnly, nil)

	deadline := time.Now().Add(waitTimeout)
	for !c.HasNode(podOnly) {
		if time.Now().After(deadline) {
			t.Fatalf("node %s of a watched Pod never known", podOnly)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, ns := range []string{watched, other, "default"} {
		if !c.HasNamespace(ns) {
			t.Errorf("namespace %s unknown", ns)
		}
	}
	if !c.HasNode(withNode) {
		t.Errorf("node %s unknown", withNode)
	}
	if !c.HasCluster("west") || c.HasCluster("") || c.HasCluster("east") {
		t.Error("the registry of cluster west knows another cluster, or not its own")
	}
	if c.HasNamespace("made-up") || c.HasNode("made-up") || c.HasNode("") {
		t.Error("a made-up namespace or node is known")
	}
}
