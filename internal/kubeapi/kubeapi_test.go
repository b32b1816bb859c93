package kubeapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
	"github.com/meshpilot/meshpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestWritesReadBack: what the narrow client writes (a Lease, as replicas
// do) reads back through it and through client-go's clientset alike.
func TestWritesReadBack(t *testing.T) {
	ns := env.Namespace(t, nil)
	leases := env.API.Leases(ns)
	holder := "a"
	created, err := leases.Create(ctx(t), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{"k": "v"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder = "b"
	created.Spec.HolderIdentity = &holder
	if _, err := leases.Update(ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := env.Client.CoordinationV1().Leases(ns).Get(ctx(t), "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.HolderIdentity != "b" {
		t.Fatalf("holder %q, want b", *got.Spec.HolderIdentity)
	}
	list, err := leases.List(ctx(t), metav1.ListOptions{LabelSelector: "k=v"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list by label: %v items, %v", len(list.Items), err)
	}
	if err := leases.Delete(ctx(t), "l", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInformerFollowsTweakedWatch: an informer of NewInformer sees only
// what its selector selects, through the initial list and the watch, and
// Shutdown returns once it has stopped.
func TestInformerFollowsTweakedWatch(t *testing.T) {
	ns := env.Namespace(t, nil)
	mk := func(name string, labels map[string]string) {
		t.Helper()
		_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("before", map[string]string{"pick": "yes"})
	mk("other", nil)
	inf := kubeapi.NewInformer(env.API.ConfigMaps(ns), &corev1.ConfigMap{},
		func(o *metav1.ListOptions) { o.LabelSelector = "pick=yes" }, nil)
	var set kubeapi.Informers
	if _, err := set.Add(inf); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	set.Start(stop)
	if !cache.WaitForCacheSync(ctx(t).Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	mk("after", map[string]string{"pick": "yes"})
	testenv.Eventually(t, "the informer holds the two selected ConfigMaps", func() (bool, string) {
		keys := inf.GetStore().ListKeys()
		return len(keys) == 2 && inf.GetStore().List() != nil, "keys: " + strings.Join(keys, ",")
	})
	if _, ok, _ := inf.GetStore().GetByKey(ns + "/other"); ok {
		t.Fatal("the informer holds a ConfigMap its selector does not select")
	}
	close(stop)
	set.Shutdown()
	if !inf.IsStopped() {
		t.Fatal("Shutdown returned before the informer stopped")
	}
}
