package testutil

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

// RepoRoot returns the repository's root folder, where the README's
// commands run from.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// ReadmeCommand is a command that README.md shows: a line of a ```sh
// block, or a line that starts with "$ " in a plain ``` block (the
// prompt is not part of the command).
type ReadmeCommand struct {
	// Section is the heading above the command, e.g. "## Deploying".
	Section string
	// Text is the command exactly as written, its continuation lines and
	// comment included, for a shell to run.
	Text string
	// Line is the command on one line, comment cut and continuations
	// joined by one space: what tests compare.
	Line string
}

// ReadmeCommands returns every command README.md shows, in order.
func ReadmeCommands(t testing.TB) []ReadmeCommand {
	t.Helper()
	f, err := os.Open(filepath.Join(RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmds, err := parseCommands(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatal("README.md shows no command")
	}
	return cmds
}

// parseCommands reads the commands of a Markdown document. A comment
// starts at " #" (no command of the README quotes a "#").
func parseCommands(r io.Reader) ([]ReadmeCommand, error) {
	var (
		cmds           []ReadmeCommand
		section, block string
		inBlock        bool
		text, line     []string // the command being read, continued
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			inBlock, block = !inBlock, strings.TrimPrefix(l, "```")
		case !inBlock:
			if strings.HasPrefix(l, "#") {
				section = strings.TrimSpace(l)
			}
		case len(text) > 0 || shownAsCommand(block, l):
			l = strings.TrimPrefix(l, "$ ")
			code, _, _ := strings.Cut(l, " #")
			code = strings.TrimSpace(code)
			if code == "" || strings.HasPrefix(code, "#") {
				continue
			}
			text = append(text, l)
			if continued, ok := strings.CutSuffix(code, `\`); ok {
				line = append(line, strings.TrimSpace(continued))
				continue
			}
			line = append(line, code)
			cmds = append(cmds, ReadmeCommand{Section: section, Text: strings.Join(text, "\n"), Line: strings.Join(line, " ")})
			text, line = nil, nil
		}
	}
	return cmds, sc.Err()
}

// shownAsCommand says whether a line of a code block of language lang is
// a command: every line of a shell block, the prompted lines of a plain
// block (which otherwise shows output).
func shownAsCommand(lang, line string) bool {
	switch lang {
	case "sh", "bash", "shell", "console":
		return true
	case "":
		return strings.HasPrefix(line, "$ ")
	}
	return false
}
