#!/usr/bin/env bash
# Builds the lab's Kubernetes binaries from the Go module proxy, once per version.
# Output: $K8S_CACHE/v$VERSION/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet}.
# The cache lives outside the checkout so that CI on a warm machine skips the ~14 min build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '/k8s.io\/kubernetes v/{print $NF; exit}' "$here/k8sbuild/go.mod")
cache=${K8S_CACHE:-/var/cache/kubectl-traceflow/k8s}
out="$cache/$version/bin"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
missing=()
for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$out"; exit 0; fi
mkdir -p "$out"
# One build at a time per cache (CI and a developer's lab-up may race); the
# second waits and then finds the binaries built.
exec 9>"$cache/.build-$version.lock"
flock 9
missing=()
for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
minor=${version#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
cd "$here/k8sbuild"
for b in "${missing[@]}"; do
  start=$(date +%s)
  echo "building $b $version (cold: kube-apiserver takes ~10 min on 2 cores)" >&2
  # Build to a temporary name first so that an interrupted build never looks cached.
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/.$b.tmp" "k8s.io/kubernetes/cmd/$b"
  mv "$out/.$b.tmp" "$out/$b"
  echo "built $b in $(( $(date +%s) - start ))s" >&2
done
echo "$out"
