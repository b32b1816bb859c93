package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, stderr, code := runToEnd(t, cleanEnv(), "version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "meshpilot v9.9.9-test\ngit commit: abc123\ngo: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out != want {
		t.Errorf("output\n%s\nwant\n%s", out, want)
	}
}

func TestVersionInProcessDefaults(t *testing.T) {
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "meshpilot dev\ngit commit: ") {
		t.Errorf("output %q", out.String())
	}
}

func TestRuntimeErrorIsOneLineWithoutUsage(t *testing.T) {
	var out, errb strings.Builder
	code := run(t.Context(), []string{"watch", "--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errb)
	want := "meshpilot: the kubeconfig file /nonexistent/kubeconfig given by --kubeconfig does not exist; check the path\n"
	if code != 1 || errb.String() != want || out.String() != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestFlagErrors(t *testing.T) {
	cases := map[string][]string{
		`meshpilot: invalid --log-level "loud": use debug, info, warn or error` + "\n":                         {"--log-level", "loud", "version"},
		`meshpilot: invalid --log-format "xml": use text or json` + "\n":                                       {"--log-format", "xml", "version"},
		`meshpilot: unknown flag: --bogus (see "meshpilot watch --help")` + "\n":                               {"watch", "--bogus"},
		`meshpilot: invalid -o "yaml": use text or json (see "meshpilot watch --help")` + "\n":                 {"watch", "-o", "yaml"},
		`meshpilot: accepts at most 1 arg(s), received 2` + "\n":                                               {"watch", "pods", "svc"},
		`meshpilot: --system-namespace applies to a cluster; with --from the folder is the only source` + "\n": {"serve", "--from", ".", "--system-namespace", "istio-system"},
		`meshpilot: invalid --max-clients -1: use 0 (no cap) or more` + "\n":                                   {"serve", "--from", ".", "--max-clients", "-1"},
		`meshpilot: invalid --max-request-names 0: use 1 or more` + "\n":                                       {"serve", "--from", ".", "--max-request-names", "0"},
		`meshpilot: invalid --max-streams-per-connection 0: use 1 or more` + "\n":                              {"serve", "--from", ".", "--max-streams-per-connection", "0"},
		`meshpilot: invalid --max-new-streams-per-second -1: use 0 (no limit) or more` + "\n":                  {"serve", "--from", ".", "--max-new-streams-per-second", "-1"},
		`meshpilot: invalid --balance-interval 0s or --shed-min-age 30s: use durations above 0` + "\n":         {"serve", "--from", ".", "--balance-interval", "0"},
		`meshpilot: invalid --stream-send-timeout 0s: use a duration above 0` + "\n":                           {"serve", "--from", ".", "--stream-send-timeout", "0"},
		`meshpilot: reading the mesh config: open /nonexistent/mesh.yaml: no such file or directory` + "\n":    {"serve", "--from", ".", "--mesh-config", "/nonexistent/mesh.yaml"},
		`meshpilot: --memory-limit-ratio: ratio 2 is out of range: use 0 (off) or a ratio in (0, 1]` + "\n":    {"serve", "--from", ".", "--memory-limit-ratio", "2"},
	}
	for want, args := range cases {
		var out, errb strings.Builder
		code := run(t.Context(), args, &out, &errb)
		if code != 1 || errb.String() != want {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errb.String(), want)
		}
	}
}

func TestCommitFrom(t *testing.T) {
	info := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	cases := []struct {
		commit string
		info   *debug.BuildInfo
		want   string
	}{
		{"abc", info("vcs.revision", "def"), "abc"},
		{"dev", info("vcs.revision", "def", "vcs.modified", "false"), "def"},
		{"dev", info("vcs.revision", "def", "vcs.modified", "true"), "def-dirty"},
		{"dev", info(), "dev"},
		{"", nil, "dev"},
	}
	for _, c := range cases {
		if got := commitFrom(c.commit, c.info); got != c.want {
			t.Errorf("commitFrom(%q, %v) = %q, want %q", c.commit, c.info, got, c.want)
		}
	}
}
