package meshconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"istio.io/api/networking/v1alpha3"

	"github.com/meshpilot/meshpilot/internal/model"
)

// topologyLabels are the labels failoverPriority may not name beside
// failover, as in Istio (they would order endpoints twice).
var topologyLabels = []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "topology.istio.io/subzone"}

// ConvertLocalityLB converts a localityLbSetting (MeshConfig's, or a
// DestinationRule's loadBalancer's), refusing what Istio's validation
// (ValidateLocalityLbSetting) refuses; nil when not given.
func ConvertLocalityLB(in *v1alpha3.LocalityLoadBalancerSetting) (*model.LocalityLB, error) {
	if in == nil {
		return nil, nil
	}
	out := &model.LocalityLB{
		Disabled:         in.GetEnabled() != nil && !in.GetEnabled().GetValue(),
		FailoverPriority: slices.Clone(in.GetFailoverPriority()),
	}
	if len(in.GetDistribute()) > 0 && len(in.GetFailover()) > 0 {
		return nil, fmt.Errorf("localityLbSetting: distribute and failover cannot both be set")
	}
	if len(in.GetFailover()) > 0 {
		for i, l := range out.FailoverPriority {
			if slices.Contains(topologyLabels, l) {
				return nil, fmt.Errorf("localityLbSetting.failoverPriority[%d]: %s cannot be set with failover", i, l)
			}
		}
	}
	var froms []string
	for i, d := range in.GetDistribute() {
		path := fmt.Sprintf("localityLbSetting.distribute[%d]", i)
		var total uint32
		for _, to := range slices.Sorted(maps.Keys(d.GetTo())) {
			w := d.GetTo()[to]
			if w < 1 || w > 100 {
				return nil, fmt.Errorf("%s.to[%s]: weight %d is not within 1 and 100", path, to, w)
			}
			total += w
		}
		if total != 100 {
			return nil, fmt.Errorf("%s.to: the weights add up to %d, not 100", path, total)
		}
		if err := checkLocalities(slices.Sorted(maps.Keys(d.GetTo()))); err != nil {
			return nil, fmt.Errorf("%s.to: %w", path, err)
		}
		froms = append(froms, d.GetFrom())
		out.Distribute = append(out.Distribute, model.LocalityDistribute{From: d.GetFrom(), To: maps.Clone(d.GetTo())})
	}
	if err := checkLocalities(froms); err != nil {
		return nil, fmt.Errorf("localityLbSetting.distribute: from: %w", err)
	}
	for i, f := range in.GetFailover() {
		path := fmt.Sprintf("localityLbSetting.failover[%d]", i)
		switch {
		case f.GetFrom() == f.GetTo():
			return nil, fmt.Errorf("%s: from and to are the same region", path)
		case strings.Contains(f.GetFrom()+f.GetTo(), "/"):
			return nil, fmt.Errorf("%s: from and to are regions, without zone", path)
		case strings.Contains(f.GetFrom()+f.GetTo(), "*"):
			return nil, fmt.Errorf("%s: from and to cannot hold a wildcard", path)
		}
		out.Failover = append(out.Failover, model.LocalityFailover{From: f.GetFrom(), To: f.GetTo()})
	}
	return out, nil
}

// checkLocalities refuses locality patterns Istio refuses
// (validateLocalities): a "*" anywhere but last, an empty part, and two
// patterns that match a same locality.
func checkLocalities(patterns []string) error {
	var seen [][3]string
	for _, p := range patterns {
		if n := strings.Count(p, "*"); n > 1 || n == 1 && !strings.HasSuffix(p, "*") {
			return fmt.Errorf("%q: a wildcard may come once, last", p)
		}
		parts := strings.Split(p, "/")
		if len(parts) > 3 || slices.Contains(parts, "") {
			return fmt.Errorf("%q is not region[/zone[/subzone]]", p)
		}
		var norm [3]string
		for i := range norm {
			norm[i] = "*"
			if i < len(parts) {
				norm[i] = parts[i]
			}
		}
		for _, o := range seen {
			if overlap(norm, o) {
				return fmt.Errorf("%q overlaps another locality", p)
			}
		}
		seen = append(seen, norm)
	}
	return nil
}

func overlap(a, b [3]string) bool {
	for i := range a {
		if a[i] != b[i] && a[i] != "*" && b[i] != "*" {
			return false
		}
	}
	return true
}
