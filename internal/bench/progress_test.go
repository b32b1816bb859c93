package bench

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReportSetup: the progress lines say how far setup has come against
// every write it will make.
func TestReportSetup(t *testing.T) {
	cfg := Defaults() // 10 namespaces, 6 nodes, 200 services of 5 endpoints
	w := newWorkload(nil, &cfg)
	if want := int64(10 + 6 + 200*(2+2*5)); w.setupWrites() != want {
		t.Fatalf("setupWrites = %d, want %d", w.setupWrites(), want)
	}
	w.writes.Store(1208)
	var mu sync.Mutex // guards lines
	var lines []string
	stop := w.reportSetup(10*time.Millisecond, func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(lines)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no progress line")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop() // returns once the reporter has ended: no line after it
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(lines[0], "setup: 1208 of 2416 writes (50 %)") || !strings.Contains(lines[0], selfName+" ") {
		t.Errorf("progress line %q", lines[0])
	}
}
