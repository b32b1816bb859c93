package translate

import "github.com/meshpilot/meshpilot/internal/model"

// serviceCluster reads a name that designates a whole service port, as
// route configurations are named: a route configuration never designates
// a subset.
func serviceCluster(name string) (host model.Hostname, port int32, ok bool) {
	k, ok := model.ParseClusterName(name)
	if !ok || k.Subset != "" {
		return "", 0, false
	}
	return k.Host, k.Port, true
}
