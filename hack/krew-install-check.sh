#!/usr/bin/env bash
# Installs the plugin with krew from the rendered manifest and the local
# linux/amd64 archive into a temporary KREW_ROOT, then runs it through kubectl.
set -euo pipefail
version=${RELEASE_VERSION:?}
krew=${KREW:?path to the krew binary}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
export KREW_ROOT=$root
archive=dist/kubectl-traceflow_${version}_linux_amd64.tar.gz
"$krew" install --manifest=dist/traceflow.yaml --archive="$archive"
export PATH=$root/bin:$PATH
out=$(kubectl traceflow version)
echo "$out"
grep -q "$version" <<<"$out" || { echo "kubectl traceflow version does not print $version" >&2; exit 1; }
[ -x "$root/bin/kubectl-traceflow" ] || { echo "krew did not link kubectl-traceflow" >&2; exit 1; }
