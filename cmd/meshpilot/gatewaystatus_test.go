package main

import (
	"strings"
	"testing"
)

func TestGatewayControllerNameFlag(t *testing.T) {
	cases := map[string][]string{
		`meshpilot: --gateway-controller-name: "mesh-controller" is not a Gateway API controller name: want a domain, a slash and a path of at most 253 characters in all, e.g. meshpilot.io/mesh-controller` + "\n": {"serve", "--from", ".", "--gateway-controller-name", "mesh-controller"},
		// A folder's routes have no status to write.
		`meshpilot: --gateway-controller-name applies to a cluster; with --from the folder is the only source` + "\n": {"serve", "--from", ".", "--gateway-controller-name", "example.com/mesh"},
	}
	for want, args := range cases {
		var out, errb strings.Builder
		code := run(t.Context(), args, &out, &errb)
		if code != 1 || errb.String() != want {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errb.String(), want)
		}
	}
}
