package golden

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCaseOf(t *testing.T) {
	for path, want := range map[string]string{
		"basic/listeners.json":  "basic",
		"kube-dns.json":         "kube-dns",
		"a/b/c.json":            "a",
		"README":                "README",
		filepath.Join("x", "y"): "x",
	} {
		if got := caseOf(path); got != want {
			t.Errorf("caseOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestStale: an output is stale when its case has no input, or when its
// case ran to its end without making it; the outputs of a case that did
// not run (-run left it out) or stopped early are kept, so that running
// one case, with or without -update, leaves the others alone.
func TestStale(t *testing.T) {
	out := t.TempDir()
	for _, f := range []string{
		"ran/listeners.json", "ran/secrets.json", // ran, made the first only
		"skipped/listeners.json",      // has an input, did not run
		"gone/listeners.json",         // no input any more
		"flat.json", "flat-gone.json", // one file per case
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(out, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cases{Out: out,
		made: map[string]bool{filepath.Join("ran", "listeners.json"): true, "flat.json": true},
		done: map[string]bool{"ran": true, "flat": true},
	}
	files, dirs, err := c.stale(map[string]bool{"ran": true, "skipped": true, "flat": true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		files[i], _ = filepath.Rel(out, files[i])
	}
	slices.Sort(files)
	want := []string{"flat-gone.json", filepath.Join("gone", "listeners.json"), filepath.Join("ran", "secrets.json")}
	if !slices.Equal(files, want) {
		t.Errorf("stale = %q, want %q", files, want)
	}
	if len(dirs) != 3 {
		t.Errorf("folders = %q, want gone, ran and skipped", dirs)
	}

	c.Out = filepath.Join(out, "none")
	if files, _, err := c.stale(nil); err != nil || len(files) != 0 {
		t.Errorf("without an output folder: %q, %v; want nothing", files, err)
	}
}

func TestFirstDifference(t *testing.T) {
	want := "{\n  a: 1,\n  b: 2,\n  c: 3\n}\n"
	got := "{\n  a: 1,\n  b: 20,\n  c: 3\n}\n"
	d := firstDifference([]byte(want), []byte(got))
	wantDiff := "first difference at line 3 (- file, + made):\n" +
		"  {\n    a: 1,\n-   b: 2,\n+   b: 20,\n    c: 3\n  }\n  \n"
	if d != wantDiff {
		t.Errorf("difference:\n%s\nwant:\n%s", d, wantDiff)
	}
	// Lines added at the end: nothing removed.
	if d := firstDifference([]byte("a\n"), []byte("a\nb\n")); !strings.Contains(d, "+ b\n") || strings.Contains(d, "\n- ") {
		t.Errorf("difference %q: want only the added line", d)
	}
	// A long run is cut.
	long := strings.Repeat("x\n", 20)
	if d := firstDifference([]byte(long), []byte(strings.Repeat("y\n", 20))); !strings.Contains(d, "... 12 more lines") {
		t.Errorf("difference %q: want the run cut after 8 lines", d)
	}
}
