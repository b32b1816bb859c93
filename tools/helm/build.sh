#!/usr/bin/env bash
# Builds helm for meshpilot's tests into the folder that holds
# kube-apiserver, etcd and kubectl (see tools/kube/build.sh), and skips the
# build when it is there.
#
#   tools/helm/build.sh            # prints the folder holding helm
#
# The folder is $MESHPILOT_KUBE_ASSETS, else ${XDG_CACHE_HOME:-~/.cache}/meshpilot/kube-<version>:
# helm v4.3.2 is built on client-go v0.37.2, the API server's version.
set -euo pipefail

KUBE_VERSION=v1.37.2
HELM_VERSION=v4.3.2
here=$(cd "$(dirname "$0")" && pwd)
out=${MESHPILOT_KUBE_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/meshpilot/kube-$KUBE_VERSION}
mkdir -p "$out"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/tools.go" "$here/build.sh" | sha256sum)

if [ -x "$out/helm" ] && [ -f "$out/.helm.stamp" ] && [ "$(cat "$out/.helm.stamp")" = "$stamp" ]; then
  echo "$out"
  exit 0
fi

cd "$here"
echo "building helm $HELM_VERSION into $out (a few minutes on first use)" >&2
# The flags of Helm's Makefile for a release build: without the version
# flag helm reports v4.3 alone.
go build -trimpath -o "$out/helm.tmp" \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  helm.sh/helm/v4/cmd/helm
mv "$out/helm.tmp" "$out/helm"
echo "$stamp" > "$out/.helm.stamp"
echo "$out"
