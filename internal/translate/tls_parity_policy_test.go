package translate

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestSpiffeIdentitiesAsIstiod: the identities ISTIO_MUTUAL verifies
// are istiod's service accounts of a service: its endpoints' accounts in
// the trust domain and each alias, then the service's own as written,
// a SPIFFE one also in each alias, each once.
func TestSpiffeIdentitiesAsIstiod(t *testing.T) {
	st := model.NewStore()
	svc := service("echo", "apps", 80)
	svc.ServiceAccounts = []string{"spiffe://cluster.local/ns/apps/sa/canonical", "echo.example.com", "spiffe://cluster.local/ns/apps/sa/pod"}
	st.Update(svc, []*model.Endpoint{{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", ServiceAccount: "pod"}})
	mesh := &model.MeshSettings{TrustDomain: "cluster.local", TrustDomainAliases: []string{"old.example"}}
	got := spiffeIdentities(st, svc, mesh)
	want := []string{
		"spiffe://cluster.local/ns/apps/sa/pod", "spiffe://old.example/ns/apps/sa/pod",
		"echo.example.com", "spiffe://cluster.local/ns/apps/sa/canonical", "spiffe://old.example/ns/apps/sa/canonical",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
