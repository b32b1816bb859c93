package kubeconv

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestLabelSetsForgetCollectedSets: a set no PodInfo holds any longer
// leaves the table, so that deleted workloads cost nothing.
func TestLabelSetsForgetCollectedSets(t *testing.T) {
	sets := &labelSets{sets: map[string]weak.Pointer[labelSet]{}}
	held := sets.get(map[string]string{"app": "kept"}, model.Locality{})
	sets.get(map[string]string{"app": "dropped"}, model.Locality{})
	if again := sets.get(map[string]string{"app": "kept"}, model.Locality{}); again != held {
		t.Fatal("equal labels got two sets")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		sets.mu.Lock()
		n := len(sets.sets)
		sets.mu.Unlock()
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
