// Package golden runs golden-file tests: each input file under
// testdata/in is one case, one behaviour, and what the code under test
// makes of it is compared with files checked in under testdata/out, which
// a reviewer reads as the behaviour's specification. `go test -update`
// rewrites the outputs and removes those no case makes any more, so that
// a change of behaviour shows as a diff of testdata/out.
//
// It is for tests only: importing it adds the -update flag to the binary.
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/out and remove those no case makes")

// Cases are the golden cases of one test. A case's outputs are
// <Out>/<case>.<ext> or files under <Out>/<case>/.
//
// The fields are set once; Run and Check are called from the test's
// goroutine and its sequential subtests (cases must not call t.Parallel:
// stale outputs are looked for once every case has run).
type Cases struct {
	// In is the glob of the inputs, one case per file, named by its base
	// name without extension: "testdata/in/*.yaml".
	In string
	// Out is the folder of the outputs: "testdata/out".
	Out string
	// Rerun is the command that rewrites the outputs, quoted in failures:
	// "go test ./internal/translate -run TestGolden -update".
	Rerun string

	made map[string]bool // outputs checked, by path under Out
	done map[string]bool // cases that ran to their end
}

// Run runs test for each input as a subtest named after the case, then
// looks for stale outputs: files under Out that a case ran to its end
// without making, or whose case has no input. They fail the test, or are
// removed with -update. Outputs of a case that did not run (left out by
// -run) or stopped early (t.Fatal) are left alone, so that running one
// case never touches the others.
func (c *Cases) Run(t *testing.T, test func(t *testing.T, name string, input []byte)) {
	t.Helper()
	files, err := filepath.Glob(c.In)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs match %s: %v", c.In, err)
	}
	c.made, c.done = map[string]bool{}, map[string]bool{}
	inputs := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		inputs[name] = true
		t.Run(name, func(t *testing.T) {
			input, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			test(t, name, input)
			c.done[name] = true
		})
	}
	c.removeStale(t, inputs)
}

// Check compares got with the output at path (under Out, e.g.
// "basic/listeners.json"), or writes it with -update. A missing or
// different file fails the case and the case goes on, so that one run
// reports every output that differs.
func (c *Cases) Check(t testing.TB, path string, got []byte) {
	t.Helper()
	c.made[filepath.Clean(path)] = true
	file := filepath.Join(c.Out, path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%v: run %s to create it, and review it", err, c.Rerun)
		return
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from what the case makes; run %s and review the diff\n%s", file, c.Rerun, firstDifference(want, got))
	}
}

// caseOf names the case an output belongs to: the first element of its
// path under Out, without extension.
func caseOf(path string) string {
	first, _, _ := strings.Cut(filepath.ToSlash(path), "/")
	return strings.TrimSuffix(first, filepath.Ext(first))
}

func (c *Cases) removeStale(t *testing.T, inputs map[string]bool) {
	t.Helper()
	files, dirs, err := c.stale(inputs)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if !*update {
			t.Errorf("%s is made by no golden case; run %s to remove it", file, c.Rerun)
			continue
		}
		if err := os.Remove(file); err != nil {
			t.Error(err)
		}
	}
	if *update {
		// Folders left empty, deepest first.
		for i := len(dirs) - 1; i >= 0; i-- {
			if entries, err := os.ReadDir(dirs[i]); err == nil && len(entries) == 0 {
				_ = os.Remove(dirs[i])
			}
		}
	}
}

// stale lists the outputs under Out that no case makes (see Run), and
// every folder under Out.
func (c *Cases) stale(inputs map[string]bool) (files, dirs []string, err error) {
	err = filepath.WalkDir(c.Out, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && file == c.Out {
				return nil // no output yet
			}
			return err
		}
		path, err := filepath.Rel(c.Out, file)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." {
				dirs = append(dirs, file)
			}
			return nil
		}
		name := caseOf(path)
		if !c.made[path] && (!inputs[name] || c.done[name]) {
			files = append(files, file)
		}
		return nil
	})
	return files, dirs, err
}

// firstDifference shows where got departs from want: the first run of
// lines that differ (the lines between the longest common head and the
// longest common tail), a few of each side, with some context. Enough to
// see what changed without printing a whole file; -update and git diff
// show the rest.
func firstDifference(want, got []byte) string {
	const context, shown = 3, 8
	w := strings.Split(string(want), "\n")
	g := strings.Split(string(got), "\n")
	head := 0
	for head < len(w) && head < len(g) && w[head] == g[head] {
		head++
	}
	tail := 0
	for tail < len(w)-head && tail < len(g)-head && w[len(w)-1-tail] == g[len(g)-1-tail] {
		tail++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (- file, + made):\n", head+1)
	for _, l := range w[max(0, head-context):head] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	section := func(mark string, lines []string) {
		for i, l := range lines {
			if i == shown {
				fmt.Fprintf(&b, "%s ... %d more lines\n", mark, len(lines)-shown)
				break
			}
			fmt.Fprintf(&b, "%s %s\n", mark, l)
		}
	}
	section("-", w[head:len(w)-tail])
	section("+", g[head:len(g)-tail])
	for _, l := range w[len(w)-tail : min(len(w), len(w)-tail+context)] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
