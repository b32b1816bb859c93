package main

import (
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/cli"
)

// TestFlags: the demo's own flags and the shared logging flags are
// there, and mistakes are one line named after the binary.
func TestFlags(t *testing.T) {
	var out, errb strings.Builder
	if code := cli.Run(t.Context(), newDemoCommand(), []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"--dir", "--backend-port", "--duration", "--interval", "--log-level", "--log-format"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("--help shows no %s:\n%s", f, out.String())
		}
	}
	cases := map[string][]string{
		`meshpilot-demo: invalid --log-level "loud": use debug, info, warn or error` + "\n": {"--log-level", "loud"},
		`meshpilot-demo: unknown flag: --bogus (see "meshpilot-demo --help")` + "\n":        {"--bogus"},
		`meshpilot-demo: unknown command "demo" for "meshpilot-demo"` + "\n":                {"demo"},
	}
	for want, args := range cases {
		errb.Reset()
		if code := cli.Run(t.Context(), newDemoCommand(), args, &out, &errb); code != 1 || errb.String() != want {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errb.String(), want)
		}
	}
}
