// Package statustest checks in tests what every conversion's
// configstatus.Status must say, whatever the object: each field it names
// has a path in the spec and a reason, and a refused object is not
// converted.
package statustest

import (
	"strings"

	"github.com/meshpilot/meshpilot/internal/configstatus"
)

// TB is the part of testing.TB that Check uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Check fails t when st refuses an object that was converted anyway, or
// names a field without a reason or outside the spec. A path is not
// checked further: map keys (label names, header names) are written as
// children and may hold any character.
func Check(t TB, st configstatus.Status, converted bool) {
	t.Helper()
	if st.Refused != nil && converted {
		t.Fatalf("refused (%+v) but converted", *st.Refused)
	}
	fields := append(append([]configstatus.Field{}, st.IgnoredGRPC...), st.IgnoredEnvoy...)
	if st.Refused != nil {
		fields = append(fields, *st.Refused)
	}
	for _, f := range fields {
		rest, inSpec := strings.CutPrefix(f.Path, "spec")
		if f.Why == "" || !inSpec || (rest != "" && rest[0] != '.' && rest[0] != '[') {
			t.Fatalf("a status that does not say which field or why: %+v", f)
		}
	}
}
