package testutil

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lines collects output written to it (by a process or in-process code)
// and lets a test wait for a line. Safe for concurrent use.
type Lines struct {
	mu      sync.Mutex // guards partial, all and added
	partial string
	all     []string
	added   chan struct{}
}

// NewLines returns an empty collector.
func NewLines() *Lines { return &Lines{added: make(chan struct{}, 1)} }

func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	parts := strings.Split(l.partial+string(p), "\n")
	l.partial = parts[len(parts)-1]
	l.all = append(l.all, parts[:len(parts)-1]...)
	select {
	case l.added <- struct{}{}:
	default:
	}
	return len(p), nil
}

// String returns the complete lines so far.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// Len returns how many complete lines have been written: a test that
// notes it before an action can then look only at the lines written since.
func (l *Lines) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// Await waits up to Wait for a line, from index from on, that satisfies
// match, and returns its index; what names the line in the failure.
func (l *Lines) Await(t testing.TB, what string, from int, match func(string) bool) int {
	t.Helper()
	timeout := time.After(Wait)
	for {
		l.mu.Lock()
		for i := from; i < len(l.all); i++ {
			if match(l.all[i]) {
				l.mu.Unlock()
				return i
			}
		}
		from = max(from, len(l.all))
		l.mu.Unlock()
		select {
		case <-l.added:
		case <-timeout:
			t.Fatalf("no line with %s; output:\n%s", what, l.String())
		}
	}
}

var countRE = regexp.MustCompile(`(127\.0\.0\.\d+): (\d+)`)

// Counts reads the demo's report line ("15:04:05  127.0.0.11: 34
// 127.0.0.12: 33 ...") as RPCs per backend address.
func Counts(line string) map[string]int {
	out := map[string]int{}
	for _, m := range countRE.FindAllStringSubmatch(line, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}
