package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond every 20 ms until it holds, and fails the test
// after Wait with what and cond's last detail.
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
