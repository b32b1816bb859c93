package kubeconv_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// TestExportToAnnotation: networking.istio.io/exportTo fills the
// service's ExportTo as Istio reads it (comma separated, spaces trimmed);
// an entry that is not ".", "*", "~" or a namespace name is skipped, and
// skipping never widens visibility: only bad entries export to none.
func TestExportToAnnotation(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		annotation *string // nil: no annotation
		want       []string
		webSees    bool // a client of namespace "web" sees the service
	}{
		{desc: "no annotation", want: nil, webSees: true},
		{desc: "empty", annotation: new(""), want: nil, webSees: true},
		{desc: "blank", annotation: new("  "), want: nil, webSees: true},
		{desc: "own namespace", annotation: new("."), want: []string{"."}, webSees: false},
		{desc: "all", annotation: new("*"), want: []string{"*"}, webSees: true},
		{desc: "none", annotation: new("~"), want: []string{"~"}, webSees: false},
		{desc: "names with spaces", annotation: new("web , ., other"), want: []string{"web", ".", "other"}, webSees: true},
		{desc: "a bad entry is skipped", annotation: new("Web_1,.,"), want: []string{"."}, webSees: false},
		{desc: "only bad entries export to none", annotation: new("web.example,-x"), want: []string{"~"}, webSees: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop"},
				Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "grpc", Port: 9080}}},
			}
			if tc.annotation != nil {
				svc.Annotations = map[string]string{kubeconv.ExportToAnnotation: *tc.annotation}
			}
			got := cvConvertService(t, svc, model.DefaultDomainSuffix)
			if !slices.Equal(got.ExportTo, tc.want) {
				t.Errorf("ExportTo = %q, want %q", got.ExportTo, tc.want)
			}
			if got.VisibleTo("web") != tc.webSees {
				t.Errorf("VisibleTo(web) = %v, want %v", !tc.webSees, tc.webSees)
			}
		})
	}
}
