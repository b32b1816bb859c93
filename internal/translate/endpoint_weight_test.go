package translate

import (
	"math"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestAddWeightStopsAtTheLargestUint32(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sum, w, want uint32
	}{
		{"ones", 2, 1, 3},
		{"up to the largest", math.MaxUint32 - 1, 1, math.MaxUint32},
		{"largest and one would wrap to 0", math.MaxUint32, 1, math.MaxUint32},
		{"two large weights", 3_000_000_000, 3_000_000_000, math.MaxUint32},
	} {
		if got := addWeight(tc.sum, tc.w); got != tc.want {
			t.Errorf("%s: addWeight(%d, %d) = %d, want %d", tc.name, tc.sum, tc.w, got, tc.want)
		}
	}
}

// TestLargeWorkloadWeightsKeepTheLocality: two HEALTHY WorkloadEntry
// endpoints whose weights add up past the largest uint32 give their
// locality the largest weight, not the 0 a wrapped sum would give, which
// grpc-go reads as a locality to drop.
func TestLargeWorkloadWeightsKeepTheLocality(t *testing.T) {
	st := model.NewStore()
	svc := service("svc", "default", 80)
	loc := model.ParseLocality("r1/z1/s1")
	st.Update(svc, []*model.Endpoint{
		{Address: "10.0.0.1", Port: 80, ServicePortName: "grpc", Locality: loc, Health: model.Healthy, Weight: math.MaxUint32},
		{Address: "10.0.0.2", Port: 80, ServicePortName: "grpc", Locality: loc, Health: model.Healthy, Weight: 1},
	})
	m := generateWith(GeneratorOptions{Discovery: st})
	cla := m.endpoints(t, Client{Namespace: "default", GRPC: true}, model.ClusterName(80, "", svc.Hostname))
	if err := Validate(cla); err != nil {
		t.Fatal(err)
	}
	if n := len(cla.GetEndpoints()); n != 1 {
		t.Fatalf("got %d localities, want 1", n)
	}
	if w := cla.GetEndpoints()[0].GetLoadBalancingWeight().GetValue(); w != math.MaxUint32 {
		t.Fatalf("locality weight %d, want %d", w, uint32(math.MaxUint32))
	}
}
