package meshconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

// TestDiscoverySelectors checks the conversion of MeshConfig's
// discoverySelectors (metav1.LabelSelector's shape) into label selectors,
// as Istio converts them, and that bad ones are refused with their field.
func TestDiscoverySelectors(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   string
		// match and miss are namespace labels each selector list must
		// select and must not select.
		match, miss []labels.Set
		want        []string // the selectors' canonical strings
		err         string   // a substring of the error; empty: no error
	}{
		{desc: "none", in: "{}", want: nil},
		{
			desc:  "matchLabels are equalities, ANDed",
			in:    "discoverySelectors: [{matchLabels: {env: prod, team: a}}]",
			want:  []string{"env=prod,team=a"},
			match: []labels.Set{{"env": "prod", "team": "a", "x": "y"}},
			miss:  []labels.Set{{"env": "prod"}, {"team": "a"}, {}},
		},
		{
			desc: "the four operators, ANDed with matchLabels",
			in: `
discoverySelectors:
- matchLabels: {env: prod}
  matchExpressions:
  - {key: team, operator: In, values: [a, b]}
  - {key: tier, operator: NotIn, values: [db]}
  - {key: mesh, operator: Exists}
  - {key: legacy, operator: DoesNotExist}
`,
			want:  []string{"env=prod,!legacy,mesh,team in (a,b),tier notin (db)"},
			match: []labels.Set{{"env": "prod", "team": "b", "mesh": ""}},
			miss: []labels.Set{
				{"env": "prod", "team": "c", "mesh": ""},
				{"env": "prod", "team": "a", "mesh": "", "tier": "db"},
				{"env": "prod", "team": "a"},
				{"env": "prod", "team": "a", "mesh": "", "legacy": "1"},
			},
		},
		{
			desc:  "several selectors: any of them selects",
			in:    "discoverySelectors: [{matchLabels: {env: prod}}, {matchLabels: {env: dev}}]",
			want:  []string{"env=prod", "env=dev"},
			match: []labels.Set{{"env": "prod"}, {"env": "dev"}},
			miss:  []labels.Set{{"env": "test"}, {}},
		},
		{
			desc:  "an empty selector selects every namespace",
			in:    "discoverySelectors: [{}]",
			want:  []string{""},
			match: []labels.Set{{}, {"env": "x"}},
		},
		{
			desc: "an operator Kubernetes does not know",
			in:   "discoverySelectors: [{matchLabels: {env: prod}}, {matchExpressions: [{key: env, operator: Equals, values: [a]}]}]",
			err:  `discoverySelectors[1].matchExpressions[0].operator: "Equals" is not In, NotIn, Exists or DoesNotExist`,
		},
		{
			desc: "operators are case sensitive, as in Kubernetes",
			in:   "discoverySelectors: [{matchExpressions: [{key: env, operator: in, values: [a]}]}]",
			err:  `discoverySelectors[0].matchExpressions[0].operator: "in"`,
		},
		{
			desc: "a bad label value",
			in:   "discoverySelectors: [{matchLabels: {env: 'not a value'}}]",
			err:  "discoverySelectors[0].matchLabels.env:",
		},
		{
			desc: "a bad label key",
			in:   "discoverySelectors: [{matchLabels: {'-env': prod}}]",
			err:  "discoverySelectors[0].matchLabels.-env:",
		},
		{
			desc: "In without values",
			in:   "discoverySelectors: [{matchExpressions: [{key: env, operator: In}]}]",
			err:  "discoverySelectors[0].matchExpressions[0]:",
		},
		{
			desc: "Exists with values",
			in:   "discoverySelectors: [{matchExpressions: [{key: env, operator: Exists, values: [a]}]}]",
			err:  "discoverySelectors[0].matchExpressions[0]:",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := meshconfig.Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range c.DiscoverySelectors {
				got = append(got, s.String())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("selectors %q, want %q", got, tc.want)
			}
			selected := func(set labels.Set) bool {
				for _, s := range c.DiscoverySelectors {
					if s.Matches(set) {
						return true
					}
				}
				return false
			}
			for _, set := range tc.match {
				if !selected(set) {
					t.Errorf("%v not selected", set)
				}
			}
			for _, set := range tc.miss {
				if selected(set) {
					t.Errorf("%v selected", set)
				}
			}
			for _, f := range c.Ignored {
				if strings.HasPrefix(f, "discoverySelectors") {
					t.Errorf("%q listed as ignored", f)
				}
			}
		})
	}
}

// TestSelectorReload follows a file whose discoverySelectors change: each
// change reaches the selector handlers once, with the new selectors, and
// is no ConfigChanged event (no generated resource reads them); a bad
// selector is refused and the last good ones stay; a change of other
// fields leaves the selector handlers alone.
func TestSelectorReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("discoverySelectors: [{matchLabels: {env: prod}}]\n")
	lines := testutil.NewLines()
	w, err := meshconfig.FromFile(path, newLogger(lines))
	if err != nil {
		t.Fatal(err)
	}
	if got := selectorStrings(w.DiscoverySelectors()); got != "env=prod" {
		t.Fatalf("after FromFile: %q", got)
	}
	var mu sync.Mutex
	var seen []string // guarded by mu
	w.AppendSelectorHandler(func(s []labels.Selector) {
		mu.Lock()
		seen = append(seen, selectorStrings(s))
		mu.Unlock()
	})
	seenNow := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seen, " / ")
	}
	events := followed(t, w)

	write("discoverySelectors: [{matchLabels: {env: prod}}, {matchExpressions: [{key: team, operator: Exists}]}]\n")
	poll(t, "the second selector", func() bool { return seenNow() == "env=prod;team" })

	from := lines.Len()
	write("discoverySelectors: [{matchExpressions: [{key: team, operator: Has}]}]\n")
	lines.Await(t, "the refusal", from, func(l string) bool {
		return strings.Contains(l, "mesh config refused") && strings.Contains(l, "discoverySelectors[0].matchExpressions[0].operator")
	})
	if got := selectorStrings(w.DiscoverySelectors()); got != "env=prod;team" {
		t.Errorf("after a bad selector: %q in force, want the last good ones", got)
	}

	from = lines.Len()
	write("discoverySelectors: [{matchLabels: {env: prod}}, {matchExpressions: [{key: team, operator: Exists}]}]\ndefaultHttpRetryPolicy: {attempts: 1}\n")
	lines.Await(t, "the retry change in force", from, func(l string) bool { return strings.Contains(l, "mesh config in force") })
	awaitAttempts(t, w, 1)

	write("{}\n")
	poll(t, "no selectors", func() bool { return seenNow() == "env=prod;team / " })
	if n := events.Load(); n != 2 {
		t.Errorf("%d ConfigChanged events, want 2 (the retry policy set, then removed)", n)
	}
}

func selectorStrings(sels []labels.Selector) string {
	var out []string
	for _, s := range sels {
		out = append(out, s.String())
	}
	return strings.Join(out, ";")
}
