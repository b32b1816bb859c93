package meshconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/meshconfig"
	"github.com/meshpilot/meshpilot/internal/testenv"
	"github.com/meshpilot/meshpilot/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestConfigMap follows ConfigMap istio of the system namespace in a real
// API server: absent, the defaults; created, updated, broken (refused,
// the last good one stays), deleted (the defaults again). Another
// ConfigMap of the namespace is not even seen.
func TestConfigMap(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, nil)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	lines := testutil.NewLines()
	w := meshconfig.FromConfigMap(env.API, ns, newLogger(lines))
	if w.HasSynced() || cache.IsDone(w.Synced()) {
		t.Fatal("synced before it runs")
	}
	events := followed(t, w)
	awaitSynced(t, w)
	if w.Mesh().DefaultHTTPRetry != nil {
		t.Fatalf("without the ConfigMap: %+v, want the defaults", w.Mesh())
	}

	put := func(name, mesh string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"mesh": mesh}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
			return
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("not-istio", "defaultHttpRetryPolicy: {attempts: 9}")
	put("istio", "defaultHttpRetryPolicy: {attempts: 1}")
	awaitAttempts(t, w, 1)
	put("istio", "defaultHttpRetryPolicy: {attempts: 0}")
	awaitAttempts(t, w, 0)

	from := lines.Len()
	put("istio", "defaultHttpRetryPolicy: {attempts: 0, perTryTimeout: forever}")
	lines.Await(t, "the refusal", from, func(l string) bool {
		return strings.Contains(l, "mesh config refused") && strings.Contains(l, "configmap "+ns+"/istio") &&
			strings.Contains(l, "defaultHttpRetryPolicy.perTryTimeout")
	})
	if r := w.Mesh().DefaultHTTPRetry; r == nil || r.Attempts != 0 {
		t.Errorf("after a bad ConfigMap: %+v, want the last good one (attempts 0)", r)
	}

	if err := cms.Delete(ctx, "istio", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitAttempts(t, w, -1)
	// The watcher puts a config in force before it calls the handlers, so
	// the deletion's event may still be on its way.
	poll(t, "the deletion's change event", func() bool { return events.Load() >= 3 })
	if n := events.Load(); n != 3 {
		t.Errorf("%d change events, want 3 (attempts 1, 0, the defaults)", n)
	}
	if st := w.Status(""); st.Source != "configmap "+ns+"/istio" || st.Mesh != nil {
		t.Errorf("status %+v, want the ConfigMap as source and no mesh config in force", st)
	}
}

// awaitSynced waits as the kube registry waits for the mesh config:
// on Synced, which must then agree with HasSynced.
func awaitSynced(t *testing.T, w *meshconfig.Watcher) {
	t.Helper()
	select {
	case <-w.Synced().Done():
	case <-time.After(testutil.Wait):
		t.Fatalf("%s never synced", w.Synced().Name())
	}
	if !w.HasSynced() {
		t.Fatal("Synced is done and HasSynced false")
	}
}
