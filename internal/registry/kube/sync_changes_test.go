package kube

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// TestChangesDuringSyncAreNotLost: EndpointSlices change without pause,
// at random, while the controller lists them and builds its first model,
// and a while after; once the writes stop, every service holds its
// slice's last address. Handlers queue nothing while the initial lists
// come in, since the first model reads the caches: a change that landed
// after a service's first build but before the handlers queue again
// would be lost for good, and only writes racing the sync, not a path
// picked by hand, find that window.
func TestChangesDuringSyncAreNotLost(t *testing.T) {
	ns := env.Namespace(t, nil)
	const services, writers = 300, 4
	addr := func(i, v int) string { return fmt.Sprintf("10.%d.%d.%d", i/200, i%200, v%250) }
	slices := make([]*discoveryv1.EndpointSlice, services)
	last := make([]int, services) // each writer owns the services i%writers == its number
	for i := range services {
		name := fmt.Sprint("svc-", i)
		mustCreateService(t, ns, name, grpcPort)
		slices[i] = mustCreateSlice(t, slice(ns, name+"-abc", name, 9090, grpcPort.Name, sliceEndpoint{ip: addr(i, 0)}))
	}

	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		rng := rand.New(rand.NewPCG(uint64(w), 1))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := w + writers*rng.IntN(services/writers)
				s := slices[i].DeepCopy()
				s.Endpoints[0].Addresses = []string{addr(i, last[i]+1)}
				out, err := env.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx(t), s, metav1.UpdateOptions{})
				if err != nil {
					t.Errorf("updating %s: %v", s.Name, err)
					return
				}
				slices[i], last[i] = out, last[i]+1
				writes.Add(1)
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	c, _ := startController(t, Options{Namespaces: []string{ns}})
	before := writes.Load()
	testenv.Eventually(t, "writes after the sync", func() (bool, string) {
		n := writes.Load()
		return n >= before+40, fmt.Sprintf("%d writes since the sync", n-before)
	})
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d writes, %d of them before the controller was synced", writes.Load(), before)

	testenv.Eventually(t, "every service at its slice's last address", func() (bool, string) {
		var stale []string
		for i := range services {
			host := model.ServiceHostname(fmt.Sprint("svc-", i), ns, "")
			want := addr(i, last[i])
			eps := c.Endpoints(host, grpcPort.Port, nil)
			if len(eps) != 1 || eps[0].Address != want {
				var got []string
				for _, ep := range eps {
					got = append(got, ep.Address)
				}
				stale = append(stale, fmt.Sprintf("svc-%d: %v, want %s", i, got, want))
			}
		}
		return len(stale) == 0, fmt.Sprintf("%d stale: %s", len(stale), strings.Join(stale[:min(len(stale), 5)], "; "))
	})
}
