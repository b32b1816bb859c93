package model

import (
	"reflect"
	"slices"
	"testing"
)

func TestMeshKeys(t *testing.T) {
	def := DefaultMeshSettings()
	with := func(change func(m *MeshSettings)) *MeshSettings {
		m := DefaultMeshSettings()
		change(m)
		return m
	}
	for _, tc := range []struct {
		desc string
		a, b *MeshSettings
		want []ConfigKey
	}{
		{"equal", def, DefaultMeshSettings(), nil},
		{"retry", def, with(func(m *MeshSettings) { m.DefaultHTTPRetry = &HTTPRetry{Attempts: 1} }), []ConfigKey{MeshRetryKey}},
		{"retry attempts", with(func(m *MeshSettings) { m.DefaultHTTPRetry = &HTTPRetry{} }),
			with(func(m *MeshSettings) { m.DefaultHTTPRetry = &HTTPRetry{Attempts: 1} }), []ConfigKey{MeshRetryKey}},
		{"trust domain", def, with(func(m *MeshSettings) { m.TrustDomain = "example.org" }), []ConfigKey{MeshTrustDomainKey}},
		{"alias", def, with(func(m *MeshSettings) { m.TrustDomainAliases = []string{"old.org"} }), []ConfigKey{MeshTrustDomainKey}},
		{"root namespace", def, with(func(m *MeshSettings) { m.RootNamespace = "istio-system" }), []ConfigKey{MeshRootNamespaceKey}},
		{"service settings", def, with(func(m *MeshSettings) { m.ServiceSettings = []ServiceSettings{{ClusterLocal: true}} }), []ConfigKey{MeshServiceSettingsKey}},
		{"locality", def, with(func(m *MeshSettings) { m.LocalityLB = &LocalityLB{Disabled: true} }), []ConfigKey{MeshLocalityLBKey}},
		{"both", def, with(func(m *MeshSettings) {
			m.TrustDomain = "example.org"
			m.DefaultHTTPRetry = &HTTPRetry{}
		}), []ConfigKey{MeshRetryKey, MeshTrustDomainKey}},
	} {
		if got := MeshKeys(tc.a, tc.b); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// TestMeshKeysCoverEveryField: a field added to MeshSettings without a
// part would change nothing a client receives.
func TestMeshKeysCoverEveryField(t *testing.T) {
	typ := reflect.TypeFor[MeshSettings]()
	for i := range typ.NumField() {
		m := DefaultMeshSettings()
		f := reflect.ValueOf(m).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Struct: // of slices (ExportDefaults)
			f.Field(0).Set(reflect.MakeSlice(f.Field(0).Type(), 1, 1))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		if len(MeshKeys(DefaultMeshSettings(), m)) != 1 {
			t.Errorf("a change of %s is in %v parts, want one", typ.Field(i).Name, MeshKeys(DefaultMeshSettings(), m))
		}
	}
}
