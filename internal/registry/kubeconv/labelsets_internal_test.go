package kubeconv

import (
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestLabelSetsForgetCollectedSets: a set no PodInfo holds any longer
// leaves the table, so that deleted workloads cost nothing.
func TestLabelSetsForgetCollectedSets(t *testing.T) {
	sets := newWeakTable[labelSet]()
	get := func(app string) *labelSet {
		l := map[string]string{"app": app}
		key := appendLabelsKey(nil, l, model.Locality{})
		return sets.get(key, func() *labelSet { return &labelSet{labels: AugmentLabels(l, Topology{})} })
	}
	held := get("kept")
	get("dropped")
	if again := get("kept"); again != held {
		t.Fatal("equal labels got two sets")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		n := sets.len()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sets in the table, want only the one held", n)
		}
		runtime.Gosched()
	}
	runtime.KeepAlive(held)
}

// TestPodMetasForgetCollected: the labels and owners no PodInfo holds any
// longer leave the table.
func TestPodMetasForgetCollected(t *testing.T) {
	kept := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "forget-test-kept"}}}
	dropped := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app": "forget-test-dropped"}}}
	before := podMetas.len()
	held := NewPodInfo(kept)
	NewPodInfo(dropped)
	if podMetas.len() != before+2 {
		t.Fatalf("%d pairs in the table, want %d", podMetas.len(), before+2)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		n := podMetas.len()
		if n == before+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pairs in the table, want %d", n, before+1)
		}
		runtime.Gosched()
	}
	if again := NewPodInfo(kept); again.meta != held.meta {
		t.Error("the held pair was forgotten")
	}
	runtime.KeepAlive(held)
}
