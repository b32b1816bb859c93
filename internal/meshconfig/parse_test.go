package meshconfig_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
)

func TestParse(t *testing.T) {
	no := false
	for _, tc := range []struct {
		desc    string
		in      string
		want    model.MeshSettings
		ignored []string
		err     string // a substring of the error; empty: no error
	}{
		{desc: "empty mapping: the defaults", in: "{}", ignored: []string{}},
		{
			desc: "a default retry policy, every field",
			in: `
defaultHttpRetryPolicy:
  attempts: 3
  retryOn: unavailable,503
  perTryTimeout: 2s
  backoff: 0.1s
  retryIgnorePreviousHosts: false
`,
			want: model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{
				Attempts: 3, RetryOn: "unavailable,503", PerTryTimeout: 2 * time.Second,
				Backoff: 100 * time.Millisecond, RetryIgnorePreviousHosts: &no,
			}},
		},
		{
			desc: "attempts 0 turns retries off",
			in:   "defaultHttpRetryPolicy: {attempts: 0}",
			want: model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{}},
		},
		{
			desc: "JSON, and proto field names, as protojson reads them",
			in:   `{"default_http_retry_policy": {"attempts": 1}}`,
			want: model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{Attempts: 1}},
		},
		{
			desc: "trust domain and aliases",
			in: `
trustDomain: example.org
trustDomainAliases: [old.example.org, Legacy.Example., cluster.local]
`,
			want: model.MeshSettings{TrustDomain: "example.org", TrustDomainAliases: []string{"old.example.org", "Legacy.Example.", "cluster.local"}},
		},
		{desc: "an empty trust domain is unset: the default", in: `trustDomain: ""`},
		{desc: "bad trust domain", in: "trustDomain: example..org", err: `trustDomain: "example..org" is not a trust domain`},
		{desc: "trust domain with a path", in: "trustDomain: example.org/ns", err: "trustDomain: "},
		{desc: "root namespace", in: "rootNamespace: istio-system", want: model.MeshSettings{RootNamespace: "istio-system"}},
		{desc: "an empty root namespace is unset", in: `rootNamespace: ""`},
		{desc: "bad root namespace", in: "rootNamespace: Istio_System", err: `rootNamespace: "Istio_System" is not a namespace name`},
		{
			desc: "service settings",
			in: `
serviceSettings:
- settings: {clusterLocal: true}
  hosts: ["*.shop.svc.cluster.local", "api.example.com"]
- settings: {}
  hosts: ["*"]
`,
			want: model.MeshSettings{ServiceSettings: []model.ServiceSettings{
				{Hosts: []model.Hostname{"*.shop.svc.cluster.local", "api.example.com"}, ClusterLocal: true},
				{Hosts: []model.Hostname{"*"}},
			}},
		},
		{desc: "a bad service settings host", in: `serviceSettings: [{hosts: ["a.*.com"]}]`, err: "serviceSettings[0].hosts[0]: "},
		{desc: "an empty service settings host", in: `serviceSettings: [{hosts: [ok.com]}, {hosts: [""]}]`, err: "serviceSettings[1].hosts[0]: empty"},
		{desc: "bad alias", in: "trustDomainAliases: [ok.org, bad_one.org]", err: "trustDomainAliases[1]: "},
		{desc: "empty alias", in: `trustDomainAliases: [""]`, err: "trustDomainAliases[0]: empty"},
		{
			desc: "fields meshpilot does not apply and unknown fields are listed, sorted",
			in: `
enableTracing: true
accessLogFile: /dev/stdout
notAMeshField: 1
defaultHttpRetryPolicy:
  attempts: 1
  retryRemoteLocalities: true
  typo: 2
`,
			want: model.MeshSettings{DefaultHTTPRetry: &model.HTTPRetry{Attempts: 1}},
			ignored: []string{
				"accessLogFile", "defaultHttpRetryPolicy.retryRemoteLocalities",
				"defaultHttpRetryPolicy.typo (unknown field)", "enableTracing", "notAMeshField (unknown field)",
			},
		},
		{desc: "bad syntax", in: "defaultHttpRetryPolicy: [attempts: 1", err: "syntax"},
		{desc: "not a mapping", in: "- a\n- b", err: "MeshConfig"},
		{desc: "wrong type", in: "defaultHttpRetryPolicy: {attempts: many}", err: "defaultHttpRetryPolicy.attempts: "},
		{desc: "wrong type of a message", in: "defaultHttpRetryPolicy: 3", err: "defaultHttpRetryPolicy: "},
		{desc: "negative attempts", in: "defaultHttpRetryPolicy: {attempts: -1}", err: "defaultHttpRetryPolicy.attempts"},
		{desc: "bad duration", in: "defaultHttpRetryPolicy: {attempts: 1, perTryTimeout: soon}", err: "defaultHttpRetryPolicy.perTryTimeout: "},
		{desc: "zero per-try timeout", in: "defaultHttpRetryPolicy: {attempts: 1, perTryTimeout: 0s}", err: "defaultHttpRetryPolicy.perTryTimeout"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := meshconfig.Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.TrustDomain == "" {
				tc.want.TrustDomain = model.DefaultTrustDomain
			}
			if !reflect.DeepEqual(*c.Settings, tc.want) {
				t.Errorf("settings %+v (retry %+v), want %+v (retry %+v)", *c.Settings, c.Settings.DefaultHTTPRetry, tc.want, tc.want.DefaultHTTPRetry)
			}
			if tc.ignored == nil {
				tc.ignored = []string{}
			}
			if got := append([]string{}, c.Ignored...); !slices.Equal(got, tc.ignored) {
				t.Errorf("ignored %q, want %q", got, tc.ignored)
			}
		})
	}
}
