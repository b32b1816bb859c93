package translate

import "github.com/meshpilot/meshpilot/internal/model"

// visibleService returns the service of host as a client sees it: nil when
// there is none or when its exportTo hides it from the client's namespace
// (model.Service.VisibleTo), so that a hidden service is, for that client,
// exactly an unknown host. Every generator looks services up for a client
// through here.
//
// The answer varies by namespace only for a service whose exportTo
// restricts it, whoever asks: a service exported to all (the common case)
// keeps one resource shared by every client. The caller depends on the
// host's service key already, which an exportTo change touches.
//
// A host that several namespaces define (model.Service.Others) is, for
// each client, the definition its namespace sees (ForNamespace), so the
// answer varies by namespace whatever the definitions' exportTo.
func visibleService(d model.ServiceDiscovery, c *Client, host model.Hostname) (*model.Service, Vary) {
	svc := d.GetService(host)
	if svc == nil || (svc.ExportedToAll() && len(svc.Others) == 0) {
		return svc, 0
	}
	return svc.ForNamespace(c.Namespace), VaryNamespace
}
