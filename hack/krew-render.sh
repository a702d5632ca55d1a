#!/usr/bin/env bash
# Renders krew/traceflow.yaml.tmpl into $DIST/traceflow.yaml with the
# archives' sha256 sums (from $DIST/SHA256SUMS, written by hack/release.sh).
set -euo pipefail
version=${RELEASE_VERSION:?RELEASE_VERSION is required (vX.Y.Z)}
out=${DIST:-dist}
base=${RELEASE_URL:-https://github.com/kubectl-traceflow/kubectl-traceflow/releases/download/$version}
platforms=""
while read -r sum file; do
  rest=${file#kubectl-traceflow_"${version}"_}
  rest=${rest%.tar.gz}; rest=${rest%.zip}
  os=${rest%_*} arch=${rest#*_}
  bin=kubectl-traceflow
  [ "$os" = windows ] && bin=kubectl-traceflow.exe
  platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $base/$file
    sha256: $sum
    bin: $bin
"
done < "$out/SHA256SUMS"
[ -n "$platforms" ] || { echo "no archives in $out/SHA256SUMS: run make release first" >&2; exit 1; }
awk -v v="$version" -v p="$platforms" '{ gsub(/@VERSION@/, v); if ($0 == "@PLATFORMS@") { printf "%s", p } else print }' \
  krew/traceflow.yaml.tmpl > "$out/traceflow.yaml"
echo "$out/traceflow.yaml"
