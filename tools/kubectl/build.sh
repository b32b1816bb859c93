#!/usr/bin/env bash
# Builds kubectl for meshpilot's tests into the folder that holds
# kube-apiserver and etcd (see tools/kube/build.sh), and skips the build
# when it is there.
#
#   tools/kubectl/build.sh         # prints the folder holding kubectl
#
# The folder is $MESHPILOT_KUBE_ASSETS, else ${XDG_CACHE_HOME:-~/.cache}/meshpilot/kube-<version>.
set -euo pipefail

KUBE_VERSION=v1.37.2
here=$(cd "$(dirname "$0")" && pwd)
out=${MESHPILOT_KUBE_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/meshpilot/kube-$KUBE_VERSION}
mkdir -p "$out"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum)

if [ -x "$out/kubectl" ] && [ -f "$out/.kubectl.stamp" ] && [ "$(cat "$out/.kubectl.stamp")" = "$stamp" ]; then
  echo "$out"
  exit 0
fi

cd "$here"
echo "building kubectl $KUBE_VERSION into $out (a few minutes on first use)" >&2
go build -trimpath -o "$out/kubectl.tmp" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
  .
mv "$out/kubectl.tmp" "$out/kubectl"
echo "$stamp" > "$out/.kubectl.stamp"
echo "$out"
