// Package liveheap measures the live heap for the memory benchmarks and
// tests of several packages. It imports nothing of meshpilot, so that any
// package's internal tests can use it without an import cycle.
package liveheap

import "runtime"

// AfterGC returns the heap in use once garbage is collected. It collects
// twice: the second cycle frees what the first one's finalizers, cleanups
// and weak pointers let go.
func AfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
