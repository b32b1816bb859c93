package meshconfig_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/model"
)

// TestParseExportDefaults: the three default exportTo fields are applied
// (not listed as ignored), kept as written, and an entry that is no
// exportTo entry refuses the config, naming it.
func TestParseExportDefaults(t *testing.T) {
	for _, tc := range []struct {
		desc, in string
		want     model.ExportDefaults
		err      string
	}{
		{desc: "none: Istio's default, every namespace", in: "{}"},
		{
			desc: "each kind",
			in:   "defaultServiceExportTo: [.]\ndefaultVirtualServiceExportTo: ['*']\ndefaultDestinationRuleExportTo: [., istio-system]",
			want: model.ExportDefaults{Service: []string{"."}, VirtualService: []string{"*"}, DestinationRule: []string{".", "istio-system"}},
		},
		{desc: "nowhere", in: "defaultServiceExportTo: ['~']", want: model.ExportDefaults{Service: []string{"~"}}},
		{desc: "not an entry", in: "defaultVirtualServiceExportTo: [., 'Shop_1']", err: `defaultVirtualServiceExportTo[1]: "Shop_1"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := meshconfig.Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Settings.DefaultExportTo, tc.want) || len(c.Ignored) != 0 {
				t.Errorf("defaults %+v, ignored %v; want %+v, none", c.Settings.DefaultExportTo, c.Ignored, tc.want)
			}
		})
	}
}
