package crd

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/meshpilot/meshpilot/internal/kubeapi"
)

// crdGroupOptions is apiextensions.k8s.io/v1 read as JSON into crdObject
// (see there why not as protobuf into apiextensions' own types).
var crdGroupOptions = kubeapi.GroupOptions{
	GroupVersion: crdGroupVersion,
	AddToScheme:  addCRDToScheme,
}

// newCRDInformer watches one CustomResourceDefinition by name. A field
// selector on metadata.name is what lets RBAC grant list and watch by
// resourceNames, so meshpilot needs no right to read other CRDs; and the
// four informers together cost four tiny watches.
func newCRDInformer(client *kubeapi.Group, name string) (cache.SharedIndexInformer, error) {
	crds := kubeapi.NewResource(client, "customresourcedefinitions", "",
		func() *crdObject { return &crdObject{} }, func() *crdObjectList { return &crdObjectList{} })
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return crds.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return crds.Watch(ctx, o)
		},
	}, client)
	inf := cache.NewSharedIndexInformer(lw, &crdObject{}, 0, cache.Indexers{})
	if err := inf.SetTransform(stripCRD); err != nil {
		return nil, err
	}
	return inf, nil
}

// stripCRD keeps of a CRD's metadata what the informer needs: a CRD
// applied with kubectl carries the whole CRD, schemas included, in its
// last-applied annotation, and its managed fields, which would otherwise
// stay cached for the life of the process. It builds a new object, so it
// is idempotent, and passes anything else (tombstones) through.
func stripCRD(obj any) (any, error) {
	crd, ok := obj.(*crdObject)
	if !ok || crd == nil {
		return obj, nil
	}
	return &crdObject{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name, UID: crd.UID, ResourceVersion: crd.ResourceVersion},
		Spec:       crd.Spec,
		Status:     crd.Status,
	}, nil
}

// crdServes reports whether a CRD is Established and serves version: only
// then can an informer list its objects. Istio releases before 1.22 served
// networking.istio.io without v1.
func crdServes(obj any, version string) bool {
	crd, ok := obj.(*crdObject)
	if !ok {
		return false
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == crdEstablished && c.Status == crdConditionOn {
			established = true
		}
	}
	if !established {
		return false
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}
