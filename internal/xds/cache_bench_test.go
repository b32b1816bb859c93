package xds

import (
	"fmt"
	"testing"

	"github.com/meshpilot/meshpilot/internal/liveheap"
	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/translate"
	"github.com/meshpilot/meshpilot/internal/xds/resource"
)

// BenchmarkCacheHeap: the heap the resource cache costs per entry, its
// dependency index included, with every type of 1000 services cached
// and held; and the time to fill it and drop one service's endpoints
// (what a push does to the index), per op.
func BenchmarkCacheHeap(b *testing.B) {
	const services = 1000
	st := benchModel(services, 5)
	client := &translate.Client{Namespace: "default", GRPC: true}
	gens := translate.Generators(translate.GeneratorOptions{Discovery: st})
	names := make([][]string, len(gens))
	for i := range services {
		host := model.Hostname(fmt.Sprintf("svc-%d.default.svc.cluster.local", i))
		cluster := model.ClusterName(8080, "", host)
		for t, g := range gens {
			name := cluster
			if g.Type().URL == resource.ListenerType {
				name = fmt.Sprintf("svc-%d:8080", i)
			}
			names[t] = append(names[t], name)
		}
	}
	var (
		held     []*entry
		c        *resourceCache
		perEntry float64
	)
	b.ReportAllocs()
	for range b.N {
		held, c = nil, nil // the previous op's cache is garbage
		before := liveheap.AfterGC()
		c = newResourceCache(gens, func(translate.ResourceType, string, error) {})
		for t := range gens {
			for _, name := range names[t] {
				held = append(held, c.get(t, client, name))
			}
		}
		perEntry = float64(liveheap.AfterGC()-before) / float64(len(held))
		for _, k := range held[0].deps {
			c.drop(k)
		}
	}
	b.ReportMetric(perEntry, "B/entry")
}
