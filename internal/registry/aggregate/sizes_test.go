package aggregate

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

func TestSourceSizesCountEachSource(t *testing.T) {
	a, _ := newAggregate(t,
		[]update{{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil)}}},
		[]update{
			{service("api", grpc8080), []*model.Endpoint{endpoint("10.0.0.1", "grpc", nil), endpoint("10.0.0.2", "grpc", nil)}},
			{service("web", http8080), []*model.Endpoint{endpoint("10.0.0.3", "http", nil)}},
		},
	)
	want := []SourceSize{{"s0", 1, 1}, {"s1", 2, 3}}
	if got := a.SourceSizes(); !slices.Equal(got, want) {
		t.Fatalf("SourceSizes = %+v, want %+v", got, want)
	}
}
