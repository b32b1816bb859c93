#!/usr/bin/env bash
# Builds kube-apiserver and etcd for meshpilot's tests into a cache folder
# outside the repository, and skips the build when the binaries are there.
#
#   tools/kube/build.sh            # prints the folder holding both binaries
#
# The folder is $MESHPILOT_KUBE_ASSETS, else ${XDG_CACHE_HOME:-~/.cache}/meshpilot/kube-<version>.
set -euo pipefail

KUBE_VERSION=v1.37.2
here=$(cd "$(dirname "$0")" && pwd)
out=${MESHPILOT_KUBE_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/meshpilot/kube-$KUBE_VERSION}
mkdir -p "$out"

if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ] && [ -f "$out/.stamp" ] &&
   [ "$(cat "$out/.stamp")" = "$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum)" ]; then
  echo "$out"
  exit 0
fi

cd "$here"
echo "building kube-apiserver $KUBE_VERSION and etcd into $out (a few minutes on first use)" >&2
go build -trimpath -o "$out/kube-apiserver.tmp" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
  k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
mv "$out/etcd.tmp" "$out/etcd"
cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum > "$out/.stamp"
echo "$out"
