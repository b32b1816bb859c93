// Package examples bundles meshpilot's example manifests into the binary,
// so that meshpilot-demo works from any folder.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Mesh is the demo mesh: the folder mesh/ of this package.
//
//go:embed mesh
var Mesh embed.FS

// The demo mesh's facts that the demo and its tests rely on.
const (
	// MeshNamespace holds the greeter service.
	MeshNamespace = "demo"
	// GreeterService is the service the demo's client calls.
	GreeterService = "greeter"
	// GreeterPort is the greeter's service port.
	GreeterPort = 7070
	// BackendPort is where the greeter's endpoints listen.
	BackendPort = 50051
	// EndpointsFile is the file that lists the greeter's endpoints.
	EndpointsFile = "greeter-endpoints.yaml"
)

// CopyMesh writes the demo mesh into dir, which is created if needed.
// A backendPort other than 0 replaces BackendPort in the copy.
func CopyMesh(dir string, backendPort int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(Mesh, "mesh", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path, "mesh"), "/")
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := Mesh.ReadFile(path)
		if err != nil {
			return err
		}
		if backendPort != 0 && backendPort != BackendPort {
			data = []byte(strings.ReplaceAll(string(data), fmt.Sprint(BackendPort), fmt.Sprint(backendPort)))
		}
		return os.WriteFile(dst, data, 0o644)
	})
}
