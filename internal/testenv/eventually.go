package testenv

import (
	"testing"
	"time"
)

// Wait bounds how long Eventually waits: long enough for an API server
// and the informers behind it on a loaded machine, short enough that a
// test that cannot succeed fails rather than hangs.
var Wait = 30 * time.Second

// Eventually polls cond every 20 ms until it holds, and fails the test
// after Wait with what and cond's last detail. Tests of what a change in
// the API server leads to wait with it, never with sleeps.
func Eventually(t testing.TB, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
