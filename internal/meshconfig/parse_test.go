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
		{
			desc: "unknown fields within a field applied whole are listed",
			in: `
serviceSettings:
- settings: {clusterLocal: true, clusterLocl: false}
  hosts: [a.example.com]
  host: [b.example.com]
localityLbSetting:
  failover: [{from: r1, to: r2, priority: 1}]
`,
			want: model.MeshSettings{
				ServiceSettings: []model.ServiceSettings{{Hosts: []model.Hostname{"a.example.com"}, ClusterLocal: true}},
				LocalityLB:      &model.LocalityLB{Failover: []model.LocalityFailover{{From: "r1", To: "r2"}}},
			},
			ignored: []string{
				"localityLbSetting.failover[0].priority (unknown field)", "serviceSettings[0].host (unknown field)",
				"serviceSettings[0].settings.clusterLocl (unknown field)",
			},
		},
		{desc: "a bad service settings host", in: `serviceSettings: [{hosts: ["a.*.com"]}]`, err: "serviceSettings[0].hosts[0]: "},
		{desc: "an empty service settings host", in: `serviceSettings: [{hosts: [ok.com]}, {hosts: [""]}]`, err: "serviceSettings[1].hosts[0]: empty"},
		{
			desc: "locality failover; failoverPriority is ignored",
			in: `
localityLbSetting:
  enabled: true
  failover: [{from: us-east, to: us-west}]
  failoverPriority: [topology.istio.io/network]
`,
			want: model.MeshSettings{LocalityLB: &model.LocalityLB{
				Failover: []model.LocalityFailover{{From: "us-east", To: "us-west"}}, FailoverPriority: []string{"topology.istio.io/network"},
			}},
			ignored: []string{"localityLbSetting.failoverPriority"},
		},
		{
			desc: "locality distribute",
			in: `
localityLbSetting:
  distribute:
  - from: us-west/zone1/*
    to: {"us-west/zone1/*": 80, "us-west/zone2/*": 20}
`,
			want: model.MeshSettings{LocalityLB: &model.LocalityLB{Distribute: []model.LocalityDistribute{
				{From: "us-west/zone1/*", To: map[string]uint32{"us-west/zone1/*": 80, "us-west/zone2/*": 20}},
			}}},
		},
		{desc: "locality disabled", in: "localityLbSetting: {enabled: false}", want: model.MeshSettings{LocalityLB: &model.LocalityLB{Disabled: true}}},
		{desc: "distribute and failover", in: "localityLbSetting: {distribute: [{from: a, to: {b: 100}}], failover: [{from: a, to: b}]}", err: "localityLbSetting: distribute and failover"},
		{desc: "weights not adding up to 100", in: "localityLbSetting: {distribute: [{from: a, to: {b: 60, c: 30}}]}", err: "localityLbSetting.distribute[0].to: the weights add up to 90"},
		{desc: "a weight of 0", in: "localityLbSetting: {distribute: [{from: a, to: {b: 0, c: 100}}]}", err: "localityLbSetting.distribute[0].to[b]: weight 0"},
		{desc: "overlapping destinations", in: "localityLbSetting: {distribute: [{from: a, to: {b: 50, b/z: 50}}]}", err: `localityLbSetting.distribute[0].to: "b/z" overlaps`},
		{desc: "a wildcard not last", in: "localityLbSetting: {distribute: [{from: '*/z', to: {b: 100}}]}", err: "localityLbSetting.distribute: from: "},
		{desc: "failover to the same region", in: "localityLbSetting: {failover: [{from: a, to: a}]}", err: "localityLbSetting.failover[0]: from and to are the same"},
		{desc: "failover with a zone", in: "localityLbSetting: {failover: [{from: a/z, to: b}]}", err: "localityLbSetting.failover[0]: from and to are regions"},
		{desc: "failover with topology priority", in: "localityLbSetting: {failover: [{from: a, to: b}], failoverPriority: [topology.kubernetes.io/zone]}", err: "localityLbSetting.failoverPriority[0]"},
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
