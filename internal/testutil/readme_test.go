package testutil

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCommands(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []ReadmeCommand
	}{
		{
			name: "every line of a shell block, comments cut from Line only",
			doc:  "# Title\n## Start\n\n```sh\ngo run ./cmd/x demo   # try it\n# a comment line\n\nmake\n```\n",
			want: []ReadmeCommand{
				{Section: "## Start", Text: "go run ./cmd/x demo   # try it", Line: "go run ./cmd/x demo"},
				{Section: "## Start", Text: "make", Line: "make"},
			},
		},
		{
			name: "continuation lines join into one command",
			doc:  "## B\n```sh\nx --a 1 \\\n    --b 2 > out.json\n```\n",
			want: []ReadmeCommand{{Section: "## B", Text: "x --a 1 \\\n    --b 2 > out.json", Line: "x --a 1 --b 2 > out.json"}},
		},
		{
			name: "a plain block shows output, and the commands it prompts",
			doc:  "### `x status`\n```\n$ x status --server http://h\nNAME   TYPE\nc1     grpc\n```\n",
			want: []ReadmeCommand{{Section: "### `x status`", Text: "x status --server http://h", Line: "x status --server http://h"}},
		},
		{
			name: "other languages and prose are no commands; a # in a block is no heading",
			doc:  "## A\n`go test ./...` in prose\n```go\nimport _ \"x\"\n```\n```sh\n# not a heading\nls\n```\n",
			want: []ReadmeCommand{{Section: "## A", Text: "ls", Line: "ls"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCommands(strings.NewReader(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
