package file

import "testing"

// TestInventory: the folder's namespaces (its Namespace documents and
// those every cluster has) and nodes (its Node documents, and those its
// Pods are bound to) exist; nothing else does, and no cluster.
func TestInventory(t *testing.T) {
	h := start(t, copyExamples(t), Options{})
	h.write("extra.yaml", `apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: demo}
spec:
  nodeName: node-without-document
status:
  phase: Running
  podIP: 10.9.9.9
`)
	h.until("the extra Pod", func() bool { return h.reg.WorkloadByIP("10.9.9.9") != nil })
	reg := h.reg
	for _, ns := range []string{"demo", "default", "kube-system"} {
		if !reg.HasNamespace(ns) {
			t.Errorf("namespace %s unknown", ns)
		}
	}
	for _, node := range []string{"node-a", "node-c", "node-without-document"} {
		if !reg.HasNode(node) {
			t.Errorf("node %s unknown", node)
		}
	}
	if reg.HasNamespace("made-up") || reg.HasNamespace("") || reg.HasNode("made-up") || reg.HasNode("") || reg.HasCluster("Kubernetes") {
		t.Error("a made-up namespace, node or cluster is known")
	}
}
