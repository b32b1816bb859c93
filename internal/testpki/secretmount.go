package testpki

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
)

// SecretMount is a folder updated the way the kubelet updates a Secret
// volume (its AtomicWriter): each file is a symlink "name -> ..data/name"
// and "..data" a symlink to a hidden folder holding one version of every
// file. An update writes a new hidden folder and swaps "..data" with one
// rename, so a reader sees the old set or the new one, never a mix; the
// files themselves are never written, which is why a watch on a file
// misses the update and a watch on the folder sees it.
type SecretMount struct {
	// Dir is the mount point.
	Dir string

	version atomic.Int64
}

// NewSecretMount makes an empty mount in a temporary folder of the test.
func NewSecretMount(t testing.TB) *SecretMount {
	t.Helper()
	return &SecretMount{Dir: t.TempDir()}
}

// Path is where a reader finds the file called name.
func (m *SecretMount) Path(name string) string { return filepath.Join(m.Dir, name) }

// Update replaces the Secret's data with files (name to content), as the
// kubelet does when the Secret changes.
func (m *SecretMount) Update(t testing.TB, files map[string][]byte) {
	t.Helper()
	version := "..v" + strconv.FormatInt(m.version.Add(1), 10)
	if err := os.Mkdir(filepath.Join(m.Dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(m.Dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(m.Dir, "..data")
	old, _ := os.Readlink(data) // none before the first update
	tmp := filepath.Join(m.Dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, data); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(m.Dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(m.Dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// Folder holds the files a test rotates under a reader: a SecretMount, or
// an InPlace folder.
type Folder interface {
	// Path is where a reader finds the file called name.
	Path(name string) string
	// Update writes files (name to content).
	Update(t testing.TB, files map[string][]byte)
}

// InPlace is a folder whose files are rewritten in place, one after the
// other, as a tool that writes plain files (cert-manager's csi-driver, an
// operator's script) rotates them: a reader may see some of the new
// files with some of the old ones.
type InPlace struct{ Dir string }

// NewInPlace makes an empty folder in a temporary folder of the test.
func NewInPlace(t testing.TB) InPlace { return InPlace{Dir: t.TempDir()} }

// Path is where a reader finds the file called name.
func (f InPlace) Path(name string) string { return filepath.Join(f.Dir, name) }

// Update rewrites each file in place, in the order of their names.
func (f InPlace) Update(t testing.TB, files map[string][]byte) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(f.Path(name), files[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
