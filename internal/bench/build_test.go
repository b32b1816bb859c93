package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestReleaseBuildIsTheDockerfiles: the Dockerfile builds the image's
// binary with releaseBuild's environment, flags and tags, and with no
// other flag but -o and its -X of the version, so that meshbench idle's
// release row is the image's binary.
func TestReleaseBuildIsTheDockerfiles(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, l := range strings.Split(string(data), "\n") {
		if w := shellWords(l); len(w) > 0 && w[0] == "RUN" && slices.Contains(w, "./cmd/meshpilot") {
			run = w[1:]
		}
	}
	if run == nil {
		t.Fatalf("the Dockerfile has no RUN line that builds ./cmd/meshpilot:\n%s", data)
	}
	i := slices.Index(run, "go")
	if i < 0 || i+1 >= len(run) || run[i+1] != "build" {
		t.Fatalf("the Dockerfile's build is not go build: %q", run)
	}
	if env := run[:i]; !slices.Equal(env, releaseBuild.env) {
		t.Errorf("the Dockerfile builds with environment %q, meshbench idle's release build with %q", env, releaseBuild.env)
	}
	var flags []string
	args := run[i+2:]
	for j := 0; j < len(args); j++ {
		switch a := args[j]; {
		case a == "-o":
			j++
		case a == "-ldflags" && j+1 < len(args):
			j++
			var kept []string
			ld := strings.Fields(args[j])
			for k := 0; k < len(ld); k++ {
				if ld[k] == "-X" {
					k++ // the version, which changes neither size nor memory
					continue
				}
				kept = append(kept, ld[k])
			}
			flags = append(flags, a, strings.Join(kept, " "))
		case a == "-tags" && j+1 < len(args):
			j++
			flags = append(flags, a, args[j])
		case !strings.HasPrefix(a, "-"): // the package
		default:
			flags = append(flags, a)
		}
	}
	if !slices.Equal(flags, releaseBuild.flags) {
		t.Errorf("the Dockerfile builds with flags %q (less -o and -X), meshbench idle's release build with %q", flags, releaseBuild.flags)
	}
}

// shellWords splits a line into words as a shell would for the
// Dockerfile's simple lines: on blanks, with double quotes grouping.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
