#!/usr/bin/env bash
# Builds the genuine OVN-Kubernetes (ovnkube and its CNI shim
# ovn-k8s-cni-overlay) for the lab's future ovnk mode from the source tarball
# in the fixtures, once per source and Go version (5.5 min cold at nice 19 on
# 2 cores shared with other builds, measured; about 85 MB and 58 MB stripped).
# Output (stdout): $OVNK_CACHE/KEY, holding
#   ovnkube, ovn-k8s-cni-overlay   stripped, CGO off
#   crds/                          the tarball's helm/ovn-kubernetes/crds (k8s.ovn.org CRDs)
# KEY is the start of the source's sum (src.sha256) and the Go version: other
# source or another compiler, another directory.
#
# The source is test data: the product never imports it. The module is not
# served by the Go module proxy (its go.mod has replace directives), so the
# build is offline from the tarball's complete vendor/: -mod=vendor and
# GOPROXY=off, so that a missing package fails here instead of downloading.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib/fixture.sh
. "$here/lib/fixture.sh"
fixture=${OVNK_FIXTURE:-$(dirname "$(fixture ovn-kubernetes/src.sha256)")}
if [ ! -f "$fixture/src.sha256" ]; then
  echo "the ovn-kubernetes fixture (src.sha256 and its tarball) not found at $fixture: the lab's ovnk mode builds OVN-Kubernetes from it (set OVNK_FIXTURE)" >&2
  exit 1
fi
read -r sum tarball _ <"$fixture/src.sha256"
src=$fixture/$tarball
[ -f "$src" ] || { echo "$src (named by $fixture/src.sha256) not found" >&2; exit 1; }
# GOTOOLCHAIN=local: the Go that names the key is the Go that builds (go.mod's
# toolchain line must not fetch another one).
export GOTOOLCHAIN=local
gover=$(go env GOVERSION)
key=${sum:0:16}-$gover
cache=${OVNK_CACHE:-${CACHE_DIR:-/var/cache/kubectl-traceflow}/ovnk}
out=$cache/$key
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
mkdir -p "$cache"
# One build at a time per cache (CI and a developer's lab-up may race); the
# second waits and then finds it built.
exec 9>"$cache/.build-$key.lock"
flock 9
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
start=$(date +%s)
echo "building OVN-Kubernetes from $src with $gover into $out (cold: 5 to 10 min on 2 cores)" >&2
(cd "$fixture" && sha256sum --quiet -c src.sha256) ||
  { echo "$src does not match $fixture/src.sha256" >&2; exit 1; }
# An earlier build killed halfway left its directory without .complete.
rm -rf "$out"
work=$(mktemp -d "$cache/.$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
top=${tarball%.tar.gz}
tar -xzf "$src" -C "$work" "$top/go-controller" "$top/helm/ovn-kubernetes/crds"
mkdir -p "$work/out"
commit=${top##*-}
pkg=github.com/ovn-kubernetes/ovn-kubernetes/go-controller
ldflags="-s -w -X $pkg/pkg/config.Commit=$commit -X $pkg/pkg/config.Branch=fixture"
(cd "$work/$top/go-controller" &&
  CGO_ENABLED=0 GOFLAGS="-mod=vendor -buildvcs=false" GOPROXY=off \
    go build -trimpath -ldflags "$ldflags" -o "$work/out/" ./cmd/ovnkube ./cmd/ovn-k8s-cni-overlay)
cp -r "$work/$top/helm/ovn-kubernetes/crds" "$work/out/crds"
# Both must run before the directory counts as built.
# (Output captured, not piped to grep -q: under pipefail an early grep exit
# could fail the check by SIGPIPE.)
for b in ovnkube ovn-k8s-cni-overlay; do
  if ! v=$("$work/out/$b" --version 2>&1) || { [ $b = ovnkube ] && [[ $v != *"Git commit: $commit"* ]]; }; then
    echo "the built $b does not run: ${v%%$'\n'*}" >&2
    exit 1
  fi
done
mv "$work/out" "$out"
: >"$out/.complete"
echo "built OVN-Kubernetes in $(($(date +%s) - start))s" >&2
echo "$out"
