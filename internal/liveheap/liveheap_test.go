package liveheap

import (
	"runtime"
	"testing"
)

// TestAfterGCCountsWhatIsHeld: a block held across the measurement adds
// its size to the live heap, and once dropped it is gone from it.
func TestAfterGCCountsWhatIsHeld(t *testing.T) {
	const size = 64 << 20
	base := AfterGC()
	held := make([]byte, size)
	for i := range held {
		held[i] = byte(i)
	}
	with := AfterGC()
	runtime.KeepAlive(held)
	if with < base+size*9/10 {
		t.Errorf("holding %d bytes: heap %d -> %d, want it to grow by about that", size, base, with)
	}
	if after := AfterGC(); after > base+size/10 {
		t.Errorf("after dropping %d bytes the heap is %d, want about %d", size, after, base)
	}
}
