package aggregate

import (
	"slices"
	"testing"

	"github.com/meshpilot/meshpilot/internal/model"
)

// inventorySource is a source that knows some namespaces, nodes and
// clusters.
type inventorySource struct {
	*model.Store
	namespaces, nodes, clusters []string
}

func (s inventorySource) HasNamespace(name string) bool { return slices.Contains(s.namespaces, name) }
func (s inventorySource) HasNode(name string) bool      { return slices.Contains(s.nodes, name) }
func (s inventorySource) HasCluster(id string) bool     { return slices.Contains(s.clusters, id) }

// TestInventoryOfAnySource: a namespace, node or cluster exists when any
// source that keeps an inventory knows it; a source that keeps none (a
// plain store) knows nothing, and without any source that keeps one
// every name is taken to exist.
func TestInventoryOfAnySource(t *testing.T) {
	local := inventorySource{Store: model.NewStore(), namespaces: []string{"default"}, nodes: []string{"node-1"}}
	west := inventorySource{Store: model.NewStore(), namespaces: []string{"west-only"}, nodes: []string{"west-1"}, clusters: []string{"west"}}
	a, err := New(Options{Sources: []Source{
		{Name: LocalSource, Controller: local},
		{Name: "plain", Controller: model.NewStore()},
		{Name: RemoteSourcePrefix + "west", Controller: west},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var inv model.Inventory = a
	if !inv.HasNamespace("default") || !inv.HasNamespace("west-only") || !inv.HasNode("node-1") || !inv.HasNode("west-1") || !inv.HasCluster("west") {
		t.Error("a namespace, node or cluster of a source is unknown")
	}
	if inv.HasNamespace("made-up") || inv.HasNode("made-up") || inv.HasCluster("east") {
		t.Error("a made-up namespace, node or cluster is known")
	}

	stores, _ := newAggregate(t, nil, nil)
	if !stores.HasNamespace("any") || !stores.HasNode("any") || !stores.HasCluster("any") {
		t.Error("without an inventory, a name is taken not to exist")
	}
}
