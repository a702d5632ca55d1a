# shellcheck shell=bash
# The lab's binaries and its images (one-layer OCI archives, no Docker).
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here.

# ---------------------------------------------------------------- build
build() {
  "$root/hack/install-deps.sh"
  # Beyond install-deps' list, the lab needs openssl (certificates) and kubectl.
  command -v openssl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssl >/dev/null
  command -v kubectl >/dev/null || die "kubectl not found: install kubectl (v1.32 or newer) on PATH"
  K8S_BIN=$("$here/build-k8s.sh")
  # Every command under test/lab/cmd: lab-agent and lab-cni (lab mode), lab-ovnkube (OVN mode),
  # lab-image, pause, workload.
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/lab/ ./test/lab/cmd/...)
  [ -x "$root/bin/traceflow-helper" ] || (cd "$root" && make -s build >/dev/null)
  # Tag the helper image with the version stamped into the binary: the plugin
  # from the same `make build` defaults to exactly that image.
  local version
  version=$("$root/bin/traceflow-helper" version 2>/dev/null | awk '{print $2}')
  [ -n "$version" ] || version=$("$root/hack/version.sh")
  HELPER_IMG=$HELPER_REPO:$version
}

# images: one-layer OCI archives, no Docker involved.
images() {
  local b=$root/bin/lab out=$S/images
  mkdir -p "$out"
  # Not in parallel: a bare `wait` here would also wait for the daemons.
  "$b/lab-image" -ref "$PAUSE_IMG" -o "$out/pause.tar" -entrypoint /pause "$b/pause=/pause"
  "$b/lab-image" -ref "$WORKLOAD_IMG" -o "$out/workload.tar" -entrypoint /workload "$b/workload=/workload"
  "$b/lab-image" -ref "$HELPER_IMG,$HELPER_REPO:latest" -o "$out/helper.tar" -entrypoint /traceflow-helper \
    "$root/bin/traceflow-helper=/traceflow-helper" "$root/bin/traceflow-helper=/usr/local/bin/traceflow-helper"
  echo "$HELPER_IMG" >"$S/helper-image"
}

import_images() {
  local n=$1 img
  for img in "$S"/images/*.tar; do
    ctr --address "$S/nodes/$n/root/run/containerd/containerd.sock" -n k8s.io image import \
      --snapshotter native "$img" >/dev/null
  done
}
