package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/multicluster"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

// With Config.Clusters above 1 the run is a multicluster mesh. The API
// server meshpilot is given is the first cluster (its --cluster-id); every
// other cluster gets an API server of its own, started for the run, with
// the same services (same names and namespaces, so one hostname each) and
// as many endpoints of its own, from an address range of its own, so that
// each hostname's endpoints are the union over the clusters. meshpilot
// reaches them through one remote Secret per cluster in its system
// namespace, as `istioctl create-remote-secret` writes it. Clients count
// as converged when they hold every cluster's endpoints, and churn adds
// endpoints in each cluster in turn.

// maxClusters bounds Config.Clusters: each cluster's endpoint addresses
// are one /12 of 10.128.0.0/9 (clusterAddrBits).
const maxClusters = 8

// clusterAddrBits: cluster i's addresses start at addrBase + i<<20, a
// million per cluster.
const clusterAddrBits = 20

// defaultSystemNamespace is meshpilot's --system-namespace default, where
// it looks for remote Secrets.
const defaultSystemNamespace = "meshpilot-system"

// remoteCluster is a cluster besides meshpilot's own.
type remoteCluster struct {
	id  string
	env *testenv.Env
	w   *workload
}

// remoteClusterID names the cluster of index i (0 is meshpilot's own).
func remoteClusterID(i int) string { return fmt.Sprintf("cluster-%d", i+1) }

// remoteClusters are the clusters of a run besides meshpilot's own, in
// order.
type remoteClusters []*remoteCluster

// startRemoteClusters starts an API server per cluster besides the first,
// writes the workload into each and a remote Secret for each into the
// system namespace of local, meshpilot's cluster. stop deletes the
// Secrets and stops the API servers; it is to be called once meshpilot
// has stopped, also when err is set.
func startRemoteClusters(ctx context.Context, cfg *Config, local kubernetes.Interface, logf func(string, ...any)) (rcs remoteClusters, stop func(), err error) {
	var secrets []string
	system := argValue(cfg.MeshpilotArgs, "system-namespace", defaultSystemNamespace)
	stop = func() {
		for _, name := range secrets {
			// The context may have ended: the API server should still
			// lose the Secret, or a later run against it would reach
			// for this run's stopped API servers.
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := local.CoreV1().Secrets(system).Delete(dctx, name, metav1.DeleteOptions{}); err != nil {
				logf("deleting remote Secret %s/%s: %v", system, name, err)
			}
			cancel()
		}
		for _, rc := range rcs {
			logf("stopping the API server of %s", rc.id)
			if err := rc.env.Stop(); err != nil {
				logf("stopping the API server of %s: %v", rc.id, err)
			}
		}
	}
	for i := 1; i < cfg.Clusters; i++ {
		id := remoteClusterID(i)
		logf("starting etcd and kube-apiserver of %s", id)
		env, err := testenv.Start()
		if err != nil {
			return rcs, stop, fmt.Errorf("starting the API server of %s: %w", id, err)
		}
		rc := &remoteCluster{id: id, env: env}
		rcs = append(rcs, rc)
		kc, err := kubeWriter(env.Config)
		if err != nil {
			return rcs, stop, err
		}
		rc.w = newWorkload(kc, cfg)
		rc.w.addrOffset = uint32(i) << clusterAddrBits
		logf("writing the same services into %s, endpoints from %s", id, rc.w.addrAt(1))
		if err := rc.w.setup(ctx); err != nil {
			return rcs, stop, fmt.Errorf("writing the workload of %s: %w", id, err)
		}
	}
	if err := ensureNamespace(ctx, local, system); err != nil {
		return rcs, stop, err
	}
	for _, rc := range rcs {
		s, err := remoteSecret(rc.id, system, rc.env.Kubeconfig)
		if err != nil {
			return rcs, stop, err
		}
		if _, err := local.CoreV1().Secrets(system).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return rcs, stop, fmt.Errorf("writing the remote Secret of %s: %w", rc.id, err)
		}
		secrets = append(secrets, s.Name)
		logf("wrote remote Secret %s/%s", system, s.Name)
	}
	return rcs, stop, nil
}

// fastWrites is cfg with a client-side rate limit high enough for the
// setup's writes.
func fastWrites(cfg *rest.Config) *rest.Config {
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = 5000, 10000
	return rc
}

// remoteSecret is the Secret that gives meshpilot cluster id, as
// `istioctl create-remote-secret` writes it: named after the cluster,
// labelled istio/multiCluster=true, one data key (the cluster ID) holding
// a kubeconfig of the cluster's API server.
func remoteSecret(id, namespace, kubeconfigPath string) (*corev1.Secret, error) {
	kc, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of %s: %w", id, err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: "istio-remote-secret-" + id, Namespace: namespace,
			Labels:      map[string]string{multicluster.Label: multicluster.LabelValue},
			Annotations: map[string]string{"networking.istio.io/cluster": id},
		},
		Data: map[string][]byte{id: kc},
	}, nil
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return wrap(err, "creating namespace %s", name)
}

// writes counts the API writes of every remote workload.
func (rcs remoteClusters) writes() int64 {
	var n int64
	for _, rc := range rcs {
		n += rc.w.writes.Load()
	}
	return n
}

// workloads are the workloads of every cluster, local first.
func (rcs remoteClusters) workloads(local *workload) []*workload {
	out := []*workload{local}
	for _, rc := range rcs {
		out = append(out, rc.w)
	}
	return out
}

// await polls meshpilot's metrics at url until its model holds want
// endpoints (every cluster's): meshpilot's readiness does not wait for
// remote clusters, and clients opened before they are in would measure
// their sync rather than convergence. The registry gauge is read rather
// than /debug/endpointz, whose pages of every endpoint would grow
// meshpilot's heap ahead of the memory figures.
func (rcs remoteClusters) await(ctx context.Context, url string, want int, timeout time.Duration) error {
	if len(rcs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	var last string
	for {
		n, err := gauge(ctx, client, url, endpointsGauge)
		if err == nil && n >= float64(want) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%s is %g", endpointsGauge, n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("meshpilot's model did not hold every cluster's %d endpoints in time: %s", want, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// endpointsGauge counts the endpoints of meshpilot's served model, every
// cluster's.
const endpointsGauge = "meshpilot_registry_endpoints"

// gauge reads the value of an unlabelled metric from the Prometheus text
// page at url.
func gauge(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	m, err := scrape(ctx, client, url, name)
	return m[name], err
}

// scrape reads metrics from the Prometheus text page at url, each the sum
// of its series (over every label value); a metric missing from the page
// is an error.
func scrape(ctx context.Context, client *http.Client, url string, names ...string) (map[string]float64, error) {
	out, err := scrapePresent(ctx, client, url, names...)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s has no %s", url, name)
		}
	}
	return out, nil
}

// scrapePresent is scrape leaving out, without an error, the metrics the
// page lacks: an older meshpilot exports fewer.
func scrapePresent(ctx context.Context, client *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Not gzip, which Go's client asks for by default: the Prometheus
	// handler would gzip the page with a compressor of about 800 KiB that
	// its pool keeps, and the benchmark would measure its own reading.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	out, err := parseMetrics(resp.Body, names...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return out, nil
}

// parseMetrics reads the named metrics from a Prometheus text page, each
// the sum of its series; the page's other metrics, and names it lacks,
// are left out.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			if rest[0] == '{' {
				i := strings.LastIndexByte(rest, '}')
				if i < 0 {
					continue
				}
				rest = rest[i+1:]
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out[name] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ClusterChurn is the share of endpoint churn made in one cluster: its
// changes and their latency to every subscribed client.
type ClusterChurn struct {
	Cluster string `json:"cluster"`
	Changes int    `json:"changes"`
	Pairs   int    `json:"pairs"`
	Misses  int    `json:"misses"`
	// FromWriteStart and FromWriteReturn are as in ChurnResult.
	FromWriteStart  Percentiles `json:"from_write_start"`
	FromWriteReturn Percentiles `json:"from_write_return"`
}

// churnByCluster splits churn's changes by the cluster whose address
// range holds their endpoint; ids name the clusters in order.
func churnByCluster(r *ChurnResult, ids []string) []ClusterChurn {
	out := make([]ClusterChurn, len(ids))
	fromStart := make([][]time.Duration, len(ids))
	fromReturn := make([][]time.Duration, len(ids))
	for _, rec := range r.PerChange {
		a, err := netip.ParseAddr(rec.Address)
		if err != nil || !a.Is4() {
			continue
		}
		i := int((binary.BigEndian.Uint32(a.AsSlice()) - addrBase) >> clusterAddrBits)
		if i < 0 || i >= len(ids) {
			continue
		}
		out[i].Changes++
		for _, f := range rec.FromStartMS {
			out[i].Pairs++
			if f < 0 {
				out[i].Misses++
				continue
			}
			fromStart[i] = append(fromStart[i], msDuration(f))
			fromReturn[i] = append(fromReturn[i], msDuration(f-rec.WriteMS))
		}
	}
	for i := range out {
		out[i].Cluster = ids[i]
		out[i].FromWriteStart = percentiles(fromStart[i])
		out[i].FromWriteReturn = percentiles(fromReturn[i])
	}
	return out
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func percentiles(d []time.Duration) Percentiles {
	s := newDist(d)
	return Percentiles{P50MS: s.p(50), P90MS: s.p(90), P99MS: s.p(99), MaxMS: s.p(100)}
}

// ids names every cluster, local (meshpilot's --cluster-id) first.
func (rcs remoteClusters) ids(args []string) []string {
	out := []string{argValue(args, "cluster-id", model.DefaultClusterID)}
	for _, rc := range rcs {
		out = append(out, rc.id)
	}
	return out
}

// writeClusterRows adds a row per cluster under churn's in the summary.
func writeClusterRows(tw io.Writer, ch *ChurnResult) {
	for _, c := range ch.ByCluster {
		fs := c.FromWriteStart
		fmt.Fprintf(tw, "  %d changes in %s (%d pairs), from the write's start\t%.1f\t%.1f\t%.1f\t%.1f\t-\t%d\t\n", c.Changes, c.Cluster, c.Pairs, fs.P50MS, fs.P90MS, fs.P99MS, fs.MaxMS, c.Misses)
	}
}

// argValue is the value of meshpilot flag --name in args (the last one
// given, as meshpilot reads them), or def when it is absent or empty.
func argValue(args []string, name, def string) string {
	v := def
	for i, a := range args {
		s, ok := strings.CutPrefix(a, "--"+name+"=")
		if !ok && a == "--"+name && i+1 < len(args) {
			s, ok = args[i+1], true
		}
		if ok && s != "" {
			v = s
		}
	}
	return v
}
