// Command image writes the files that meshpilot's container image holds
// besides /meshpilot into the folder given, laid out as the image's root:
//
//	etc/ssl/certs/ca-certificates.crt   the root certificates, PEM
//	etc/passwd, etc/group               root, nobody and nonroot (65532)
//
// The image has no base image, so these come from here rather than from a
// distribution. The roots are Mozilla's NSS trust store as
// golang.org/x/crypto/x509roots/fallback bundles it, at the version go.mod
// pins: the same input gives the same bytes on any machine, where the build
// host's own bundle would differ from one host to the next. The users are
// those of distroless's static image, so that the image runs as the user
// nonroot (65532) that the Deployment names.
//
//	go -C tools/image run . DIR
package main

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The files, world-readable whatever the umask of the one who builds: the
// image runs as nonroot, which must read them.
const (
	fileMode = 0o644
	dirMode  = 0o755
)

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: image DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func write(root string) error {
	files := map[string][]byte{
		"etc/ssl/certs/ca-certificates.crt": roots(),
		"etc/passwd":                        []byte(passwd),
		"etc/group":                         []byte(group),
	}
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
			return err
		}
		for d := filepath.Dir(path); d != filepath.Clean(root); d = filepath.Dir(d) {
			if err := os.Chmod(d, dirMode); err != nil {
				return err
			}
		}
		if err := os.WriteFile(path, data, fileMode); err != nil {
			return err
		}
		if err := os.Chmod(path, fileMode); err != nil {
			return err
		}
	}
	return nil
}

// roots returns the bundle's roots as PEM, in the bundle's order. A root
// with a constraint (NSS's distrust-after date for certificates it issues)
// is left out: a PEM file cannot carry the constraint, and every reader of
// the file would trust the root without it.
func roots() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			panic(err) // only a write error, and a bytes.Buffer has none
		}
	}
	return b.Bytes()
}
