package meshconfig

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// ConfigMapName and ConfigMapKey are where Istio keeps the MeshConfig in
// its system namespace.
const (
	ConfigMapName = "istio"
	ConfigMapKey  = "mesh"
)

// FromConfigMap returns a Watcher of the `mesh` key of ConfigMap `istio`
// in namespace. Without the ConfigMap or the key, Istio's defaults are in
// force. Run watches that one object (a field selector on its name, so
// that meshpilot needs to read no other ConfigMap) until ctx ends.
func FromConfigMap(client *kubeapi.Client, namespace string, log *slog.Logger) *Watcher {
	w := newWatcher(log, "configmap "+namespace+"/"+ConfigMapName)
	w.run = func(ctx context.Context) error { return w.followConfigMap(ctx, client, namespace) }
	return w
}

func (w *Watcher) followConfigMap(ctx context.Context, client *kubeapi.Client, namespace string) error {
	inf := kubeapi.NewInformer(client.ConfigMaps(namespace), &corev1.ConfigMap{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
	}, nil)
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.applyConfigMap(obj) },
		UpdateFunc: func(old, obj any) {
			// A relist repeats every object unchanged.
			if o, n := old.(*corev1.ConfigMap), obj.(*corev1.ConfigMap); o.ResourceVersion == n.ResourceVersion {
				return
			}
			w.applyConfigMap(obj)
		},
		DeleteFunc: func(any) { _ = w.apply(nil) },
	})
	if err != nil {
		return fmt.Errorf("watching the mesh config: %w", err)
	}
	var f kubeapi.Informers
	if _, err := f.Add(inf); err != nil {
		return fmt.Errorf("watching the mesh config: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitFor(ctx, "", reg.HasSyncedChecker()) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching the mesh config: ConfigMap %s/%s never synced", namespace, ConfigMapName)
	}
	w.markSynced()
	<-ctx.Done()
	return nil
}

func (w *Watcher) applyConfigMap(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	_ = w.apply([]byte(cm.Data[ConfigMapKey]))
}
