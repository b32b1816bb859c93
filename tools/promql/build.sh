#!/usr/bin/env bash
# Builds promqlcheck, the checker of the dashboard's and the alerts'
# PromQL (Prometheus' own parser), into the cache folder beside the
# Prometheus Operator's PrometheusRule CRD (from its Go module), which the
# tests install to apply the alerts as the README does; skips both when
# they are there.
#
#   tools/promql/build.sh         # prints the folder holding promqlcheck and the CRD
#
# The folder is $MESHPILOT_PROMQL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/meshpilot/promql-<version>.
set -euo pipefail

PROMETHEUS_VERSION=v0.316.0
OPERATOR_MODULE=github.com/prometheus-operator/prometheus-operator
OPERATOR_VERSION=v0.85.0
CRD=monitoring.coreos.com_prometheusrules.yaml
here=$(cd "$(dirname "$0")" && pwd)
out=${MESHPILOT_PROMQL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/meshpilot/promql-$PROMETHEUS_VERSION}
mkdir -p "$out"
stamp=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum)

if [ -x "$out/promqlcheck" ] && [ -f "$out/$CRD" ] && [ -f "$out/.promqlcheck.stamp" ] && [ "$(cat "$out/.promqlcheck.stamp")" = "$stamp" ]; then
  echo "$out"
  exit 0
fi

cd "$here"
echo "building promqlcheck (github.com/prometheus/prometheus $PROMETHEUS_VERSION) into $out" >&2
go build -trimpath -o "$out/promqlcheck.tmp" -ldflags "-s -w" .
mv "$out/promqlcheck.tmp" "$out/promqlcheck"
operator=$(go mod download -json "$OPERATOR_MODULE@$OPERATOR_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp "$operator/example/prometheus-operator-crd/$CRD" "$out/$CRD.tmp"
mv "$out/$CRD.tmp" "$out/$CRD"
echo "$stamp" > "$out/.promqlcheck.stamp"
echo "$out"
