#!/usr/bin/env bash
# Builds Antrea's antrea-agent, antrea-controller and antrea-cni for the lab's
# Antrea mode (TFLAB_CNI=antrea) from the source tarball in the fixtures, once
# per version (about 3 minutes cold for the three on 2 cores).
# Output (stdout): $ANTREA_CACHE/$VERSION/bin, holding the three binaries and
# antrea.yml (the release manifest the lab takes its cluster objects from).
#
# The source is test data: the product never imports it. Two `replace` lines
# make every dependency resolve through the Go module proxy (which serves no
# antrea.io/* path), and the fixture's one-line patch lets the agent accept the
# userspace datapath (ovsDatapathType: netdev).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The fixtures sit beside the checkout (lib/fixture.sh); ANTREA_SRC names the
# tarball elsewhere.
# shellcheck source=lib/fixture.sh
. "$here/lib/fixture.sh"
src=${ANTREA_SRC:-$(fixture antrea/antrea-v2.3.2-src.tar.gz)}
if [ ! -f "$src" ]; then
  echo "Antrea source tarball not found at $src: the lab's Antrea mode builds Antrea from it (set ANTREA_SRC)" >&2
  exit 1
fi
patchfile=${ANTREA_PATCH:-$(dirname "$src")/accept-netdev-datapath.patch}
[ -f "$patchfile" ] || { echo "Antrea patch $patchfile not found (next to the tarball)" >&2; exit 1; }
top=$(tar -tzf "$src" | sed -n 1p); top=${top%%/*}
version=$(tar -xzOf "$src" "$top/VERSION" | tr -d '[:space:]')
[ -n "$version" ] || { echo "no VERSION in $src" >&2; exit 1; }
cache=${ANTREA_CACHE:-${CACHE_DIR:-/var/cache/kubectl-traceflow}/antrea}
out=$cache/$version/bin
bins=(antrea-agent antrea-controller antrea-cni)
complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done
  [ -s "$out/antrea.yml" ]
}
if complete; then echo "$out"; exit 0; fi
mkdir -p "$out"
# One build at a time per cache (CI and a developer's lab-up may race); the
# second waits and then finds the binaries built.
exec 9>"$cache/.build-$version.lock"
flock 9
if complete; then echo "$out"; exit 0; fi
start=$(date +%s)
echo "building Antrea $version from $src (cold: about 3 minutes on 2 cores)" >&2
work=$(mktemp -d "$cache/.src-$version.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xzf "$src" -C "$work"
cd "$work/$top"
patch -s -p1 <"$patchfile"
cat >>go.mod <<'EOF'

replace antrea.io/libOpenflow => github.com/antrea-io/libOpenflow v0.15.0

replace antrea.io/ofnet => github.com/antrea-io/ofnet v0.14.0
EOF
ldflags="-s -w -X antrea.io/antrea/pkg/version.Version=$version -X antrea.io/antrea/pkg/version.ReleaseStatus=released"
for b in "${bins[@]}"; do
  # Build to a temporary name first so that an interrupted build never looks cached.
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$out/.$b.tmp" "./cmd/$b"
done
for b in "${bins[@]}"; do mv "$out/.$b.tmp" "$out/$b"; done
cp build/yamls/antrea.yml "$out/.antrea.yml.tmp" && mv "$out/.antrea.yml.tmp" "$out/antrea.yml"
echo "built Antrea $version in $(($(date +%s) - start))s" >&2
echo "$out"
