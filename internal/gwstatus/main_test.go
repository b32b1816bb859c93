package gwstatus

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
