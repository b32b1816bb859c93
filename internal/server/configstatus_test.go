package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
)

// TestConfigStatusShown: the server shows its Options.ConfigStatus on
// /debug/configz and counts it in config_objects, following changes.
func TestConfigStatusShown(t *testing.T) {
	status := configstatus.NewReporter()
	ref := configstatus.Ref{Kind: "DestinationRule", Namespace: "shop", Name: "cart"}
	status.Set(ref, configstatus.Refuse("spec.host", "wildcard hosts are not served yet"))
	s := start(t, Options{Sources: newRegistry().sources(), ConfigStatus: status})
	read := func(path string) string {
		t.Helper()
		return getBody(t, "http://"+s.HTTPAddr()+path)
	}
	for _, state := range []string{configstatus.StateRefused, configstatus.StateApplied} {
		if state == configstatus.StateApplied {
			status.Set(ref, configstatus.Status{})
		}
		var z debug.Configz
		if err := json.Unmarshal([]byte(read("/debug/configz")), &z); err != nil {
			t.Fatal(err)
		}
		if len(z.Objects) != 1 || z.Objects[0].Ref != ref || z.Objects[0].State != state {
			t.Fatalf("/debug/configz objects %+v, want %s %s", z.Objects, ref, state)
		}
		series := `meshpilot_config_objects{kind="DestinationRule",state="` + state + `"} 1`
		if m := read("/metrics"); !strings.Contains(m, series) {
			t.Fatalf("/metrics has no %s", series)
		}
	}
}
