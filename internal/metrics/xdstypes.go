package metrics

// The xDS metrics are labelled by type, which comes from the client: a
// request names its type URL. meshpilot's xDS server reports the types
// it does not serve as OtherType already; the metrics do not rely on it.
// A client that sends a thousand made-up type URLs must not make a
// thousand series, so only the types below become labels, whatever the
// caller passes, and everything else is counted as OtherType.

// OtherType labels every xDS type that is not a known one.
const OtherType = "other"

// xdsTypeLabels maps what the xDS server reports to the label: the short
// names of the types meshpilot serves, and the type URLs of Envoy's other
// discovery services (and Istio's name table), which clients ask for and
// meshpilot answers with nothing, by their usual short names.
var xdsTypeLabels = map[string]string{
	"LDS": "LDS",
	"RDS": "RDS",
	"CDS": "CDS",
	"EDS": "EDS",

	"type.googleapis.com/envoy.config.listener.v3.Listener":                "LDS",
	"type.googleapis.com/envoy.config.route.v3.RouteConfiguration":         "RDS",
	"type.googleapis.com/envoy.config.cluster.v3.Cluster":                  "CDS",
	"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment":   "EDS",
	"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret": "SDS",
	"type.googleapis.com/envoy.service.runtime.v3.Runtime":                 "RTDS",
	"type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration":   "SRDS",
	"type.googleapis.com/envoy.config.route.v3.VirtualHost":                "VHDS",
	"type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig":        "ECDS",
	"type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint":              "LEDS",
	"type.googleapis.com/istio.networking.nds.v1.NameTable":                "NDS",
}

// typeLabel is the type label of what the xDS server reports as typ.
func typeLabel(typ string) string {
	if l, ok := xdsTypeLabels[typ]; ok {
		return l
	}
	return OtherType
}
