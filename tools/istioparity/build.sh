#!/usr/bin/env bash
# Builds istiod's pilot-discovery for the parity harness into a cache
# folder outside the repository, and skips the build when it is there.
#
#   tools/istioparity/build.sh     # prints the path of the binary
#
# The folder is $MESHPILOT_ISTIOD, else ${XDG_CACHE_HOME:-~/.cache}/meshpilot/istiod-<version>.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=$(cd "$here" && go list -m -f '{{.Version}}' istio.io/istio)
out=${MESHPILOT_ISTIOD:-${XDG_CACHE_HOME:-$HOME/.cache}/meshpilot/istiod-$version}
mkdir -p "$out"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum)
if [ -x "$out/pilot-discovery" ] && [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  echo "$out/pilot-discovery"
  exit 0
fi

cd "$here"
echo "building pilot-discovery $version into $out (about 8 minutes on 2 cores on first use)" >&2
go build -trimpath -ldflags "-s -w" -o "$out/pilot-discovery.tmp" istio.io/istio/pilot/cmd/pilot-discovery
mv "$out/pilot-discovery.tmp" "$out/pilot-discovery"
echo "$stamp" > "$out/.stamp"
echo "$out/pilot-discovery"
