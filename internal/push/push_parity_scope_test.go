package push

import (
	"testing"
	"time"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestDefaultServiceExportToIsFull: a change of the mesh's default
// exportTo changes which clients see every service that says none: the
// request is full; other mesh parts are not.
func TestDefaultServiceExportToIsFull(t *testing.T) {
	for _, tc := range []struct {
		key  model.ConfigKey
		full bool
	}{
		{model.MeshExportToKey, true},
		{model.MeshRetryKey, false},
		{model.MeshRootNamespaceKey, false},
	} {
		var r Request
		r.Add(model.Event{Kind: model.ConfigChanged, Config: tc.key}, time.Now())
		if r.Full != tc.full {
			t.Errorf("%v: full %v, want %v", tc.key, r.Full, tc.full)
		}
	}
}
