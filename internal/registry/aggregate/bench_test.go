package aggregate

import (
	"fmt"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// benchUpdates: services of eps endpoints each, addresses 10.<base>.x.y.
func benchUpdates(services, eps, base int) []update {
	var out []update
	for i := range services {
		var list []*model.Endpoint
		for j := range eps {
			list = append(list, &model.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", base, i, j), Port: 9000, ServicePortName: "grpc"})
		}
		out = append(out, update{service(fmt.Sprintf("svc-%d", i), grpc8080), list})
	}
	return out
}

// BenchmarkAggregateEndpoints is the lookup the xDS push path makes for
// every resource it generates (GetService, then Endpoints), from a store
// directly and through the aggregate: with one source (what serve runs
// today), and with two sources that both define every service.
func BenchmarkAggregateEndpoints(b *testing.B) {
	const services, eps = 200, 5
	one, stores := newAggregate(b, benchUpdates(services, eps, 0))
	two, _ := newAggregate(b, benchUpdates(services, eps, 0), benchUpdates(services, eps, 1))
	hosts := make([]model.Hostname, services)
	for i := range hosts {
		hosts[i] = model.Hostname(fmt.Sprintf("svc-%d.ns.svc.cluster.local", i))
	}
	for _, bc := range []struct {
		name string
		d    model.ServiceDiscovery
		want int
	}{
		{"store", stores[0], eps},
		{"aggregate of one source", one, eps},
		{"aggregate of two sources", two, 2 * eps},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				h := hosts[i%services]
				if bc.d.GetService(h) == nil || len(bc.d.Endpoints(h, 8080, nil)) != bc.want {
					b.Fatalf("%s: wrong answer", h)
				}
			}
		})
	}
}
