#!/usr/bin/env bash
# Checks what `make release` produced: five archives whose sums match
# SHA256SUMS, each holding the binary, the completion script, LICENSE and
# README.md; then unpacks the linux/amd64 one and runs it.
set -euo pipefail
version=${RELEASE_VERSION:?}
out=${DIST:-dist}
(cd "$out" && sha256sum --check --quiet SHA256SUMS)
n=0
for f in "$out"/kubectl-traceflow_"${version}"_*; do
  case $f in
    *.zip) list=$(unzip -Z1 "$f") ;;
    *) list=$(tar -tzf "$f") ;;
  esac
  for want in LICENSE README.md; do
    grep -qx "$want" <<<"$list" || { echo "$f lacks $want" >&2; exit 1; }
  done
  grep -q '^kubectl-traceflow' <<<"$list" && grep -q '^kubectl_complete-traceflow' <<<"$list" ||
    { echo "$f lacks the binary or the completion script" >&2; exit 1; }
  n=$((n + 1))
done
[ "$n" -eq 5 ] || { echo "want 5 archives for $version in $out, found $n" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$out/kubectl-traceflow_${version}_linux_amd64.tar.gz" -C "$tmp"
got=$("$tmp/kubectl-traceflow" version)
grep -q "kubectl-traceflow $version " <<<"$got" || { echo "unpacked binary says: $got" >&2; exit 1; }
echo "release archives OK: $n archives; linux/amd64 runs: $got"
