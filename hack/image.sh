#!/usr/bin/env bash
# Builds meshpilot's container image with podman, from no base image: the
# release build of meshpilot (the Dockerfile's flags), the CA bundle,
# passwd and group that tools/image writes, and hack/Containerfile.
#
#   hack/image.sh                                          # meshpilot/meshpilot:latest
#   IMAGE=registry.example.com/meshpilot:v0.1.0 VERSION=v0.1.0 hack/image.sh
#
# IMAGE              the image's name (default: the Deployment's, meshpilot/meshpilot:latest)
# VERSION            what "meshpilot version" prints (default: git describe)
# GOARCH             the image's architecture (default: go env GOARCH)
# SOURCE_DATE_EPOCH  the image's and its files' time (default: the commit's), so that two
#                    builds of one commit give one image ID
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-meshpilot/meshpilot:latest}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
GOARCH=${GOARCH:-$(go env GOARCH)}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# The image's files, written by a program run on this machine.
go -C tools/image run . "$ctx/rootfs"
# The Dockerfile's build of the binary, flag for flag (a test checks), for
# the image's platform.
export GOOS=linux GOARCH
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags "-s -w -X main.version=${VERSION}" -o "$ctx/meshpilot" ./cmd/meshpilot
chmod 0755 "$ctx/meshpilot"
cp hack/Containerfile "$ctx/Containerfile"

# One commit (--layers=false): no intermediate image is left behind.
podman build --layers=false --timestamp "$SOURCE_DATE_EPOCH" --os linux --arch "$GOARCH" \
  --build-arg VERSION="$VERSION" -t "$IMAGE" -f "$ctx/Containerfile" "$ctx"
