package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// replica is one meshpilot serve process of a replica run, one Pod of
// the Deployment: its own name, ports and Lease.
type replica struct {
	name     string
	xdsAddr  string
	httpAddr string
	args     []string
	env      []string
	logDir   string
	starts   int

	// proc is the running process; only the run's goroutine sets it.
	proc *process
	// ready: the Service sends new connections to it, as kube-proxy does
	// to a ready endpoint. Cleared before it is stopped, as a terminating
	// Pod's endpoint is.
	ready atomic.Bool
}

// logPath is where the current start logs: a restart keeps the first
// run's log.
func (r *replica) logPath() string {
	if r.starts <= 1 {
		return filepath.Join(r.logDir, r.name+".log")
	}
	return filepath.Join(r.logDir, fmt.Sprintf("%s-start%d.log", r.name, r.starts))
}

// start runs the process and waits for its readiness; then the Service
// sends it new connections.
func (r *replica) start(ctx context.Context, bin string) error {
	r.starts++
	p, err := startProcessEnv(bin, r.args, r.env, r.logPath())
	if err != nil {
		return err
	}
	r.proc = p
	if err := p.awaitReady(ctx, "http://"+r.httpAddr+"/readyz"); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	r.ready.Store(true)
	return nil
}

// stop takes the replica out of the Service, then stops the process
// (SIGTERM: it drains its streams for --drain-duration).
func (r *replica) stop(grace time.Duration) error {
	r.ready.Store(false)
	if r.proc == nil {
		return nil
	}
	p := r.proc
	r.proc = nil
	if err := p.stop(grace); err != nil {
		return fmt.Errorf("%s: %w (its log: %s)", r.name, err, p.logPath)
	}
	return nil
}

// kubeService stands for the Kubernetes Service in front of the replicas:
// each new connection goes to a ready replica picked at random, as
// kube-proxy's iptables and IPVS modes spread connections, and stays
// there for its life.
type kubeService struct {
	replicas []*replica
	mu       sync.Mutex // guards rng
	rng      *rand.Rand
}

func newKubeService(reps []*replica, seed uint64) *kubeService {
	return &kubeService{replicas: reps, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// dial is the clients' dialer (grpc.WithContextDialer): gRPC calls it for
// every new connection of a channel, not for a new stream on an open one.
func (s *kubeService) dial(ctx context.Context, _ string) (net.Conn, error) {
	var ready []*replica
	for _, r := range s.replicas {
		if r.ready.Load() {
			ready = append(ready, r)
		}
	}
	if len(ready) == 0 {
		return nil, errors.New("the Service has no ready endpoint")
	}
	s.mu.Lock()
	r := ready[s.rng.IntN(len(ready))]
	s.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", r.xdsAddr)
}

// replicaMetrics is what a replica's /metrics says of its clients.
type replicaMetrics struct {
	clients int // connected xDS streams, every type
	shed    int // streams on the connections it shed
}

// Metric names read from each replica.
const (
	clientsMetric = "meshpilot_xds_clients"
	shedMetric    = "meshpilot_xds_shed_streams_total"
)

// scrapeReplica reads a replica's client and shed counts, summing every
// label set of each metric.
func scrapeReplica(ctx context.Context, client *http.Client, url string) (replicaMetrics, error) {
	var m replicaMetrics
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return m, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	seen := false
	for sc.Scan() {
		name, value, ok := sampleLine(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case clientsMetric:
			m.clients += int(value)
			seen = true
		case shedMetric:
			m.shed += int(value)
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if !seen {
		return m, fmt.Errorf("%s has no %s", url, clientsMetric)
	}
	return m, nil
}

// sampleLine splits a Prometheus text sample into its metric name (labels
// dropped) and value.
func sampleLine(line string) (name string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", 0, false
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return "", 0, false
	}
	name = line[:i]
	if j := strings.IndexAny(name, "{ "); j >= 0 {
		name = name[:j]
	}
	return name, v, true
}
