// Writes the files of meshpilot's container image besides its binary (see
// main.go). Kept apart from the main module so that the pinned root
// certificates never enter meshpilot's own build.
module github.com/meshpilot/meshpilot/tools/image

go 1.26.0

require golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
