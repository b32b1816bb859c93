package xds

import "github.com/meshpilot/meshpilot/internal/model"

// serviceCluster reads a cluster name that designates a whole service
// port. A name with a subset designates nothing until subsets
// (DestinationRule) are served.
func serviceCluster(name string) (host model.Hostname, port int32, ok bool) {
	k, ok := model.ParseClusterName(name)
	if !ok || k.Subset != "" {
		return "", 0, false
	}
	return k.Host, k.Port, true
}
