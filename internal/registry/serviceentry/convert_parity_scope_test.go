package serviceentry

import (
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// TestConvertServiceEntryPortProtocol: a port without protocol is served
// with its protocol unknown, as istiod serves it (protocol.Parse("") is
// its UnsupportedProtocol, sniffed where a proxy can); a protocol Istio
// does not know is refused, as its validation refuses it.
func TestConvertServiceEntryPortProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, ports string
		want        model.Protocol
		refused     string
	}{
		{"no protocol", "[{number: 80, name: web}]", model.Unsupported, ""},
		{"GRPC", "[{number: 80, name: web, protocol: GRPC}]", model.GRPC, ""},
		{"in lower case", "[{number: 80, name: web, protocol: http2}]", model.HTTP2, ""},
		{"unknown", "[{number: 80, name: web, protocol: QUIC}]", "", "spec.ports[0].protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, st := convertServiceEntry(serviceEntry(t, "a", "hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1}]\nports: "+tc.ports), "cluster.local")
			if tc.refused != "" {
				if st.Refused == nil || st.Refused.Path != tc.refused {
					t.Fatalf("status %+v, want refused at %s", st, tc.refused)
				}
				return
			}
			if st.Refused != nil {
				t.Fatalf("refused: %+v", *st.Refused)
			}
			if got := e.services[0].Ports[0].Protocol; got != tc.want || len(e.endpoints) != 1 {
				t.Errorf("protocol %s, %d endpoints; want %s, 1", got, len(e.endpoints), tc.want)
			}
		})
	}
}
