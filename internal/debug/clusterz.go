package debug

import (
	"net/http"

	"github.com/meshpilot/meshpilot/internal/multicluster/clusterstate"
)

// registerClusterz serves /debug/clusterz: the clusters meshpilot reads,
// the local one first, as a JSON list of clusterstate.Cluster. It is
// istiod's page of the same name (the fields id, secretName and
// syncStatus are istiod's), rather than a part of /debug/syncz, which
// lists xDS streams and which scripts read as such. Without clusters
// (serve --from), the list is empty.
func registerClusterz(mux *http.ServeMux, clusters func() []clusterstate.Cluster) {
	mux.HandleFunc("GET /debug/clusterz", func(w http.ResponseWriter, _ *http.Request) {
		out := []clusterstate.Cluster{}
		if clusters != nil {
			out = append(out, clusters()...)
		}
		writeJSON(w, out)
	})
}
