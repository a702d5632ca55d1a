#!/usr/bin/env bash
# Installs the Debian packages that the unit, integration and e2e tests and the lab need.
# Idempotent: does nothing when every command is already present.
set -euo pipefail
declare -A pkg_of=(
  [ovs-vswitchd]=openvswitch-switch
  # The lab waits for each ovsdb-server to answer (ovsdb_listening in test/lab/lab.sh).
  [ovsdb-client]=openvswitch-common
  # The lab's OVN mode (TFLAB_CNI=ovn): northd and the NB/SB schemas, and ovn-controller.
  [ovn-northd]=ovn-central
  [ovn-controller]=ovn-host
  [containerd]=containerd
  [runc]=runc
  [etcd]=etcd-server
  [ethtool]=ethtool
  [ip]=iproute2
  [tmux]=tmux
  [nsenter]=util-linux
  [zip]=zip
  # The lab's Antrea mode (TFLAB_CNI=antrea): antrea-agent manages ipsets.
  [ipset]=ipset
  [unzip]=unzip
  # `kubectl traceflow check --junit` output is validated against Jenkins' JUnit schema.
  [xmllint]=libxml2-utils
  # make test-unit and test-integration run under the race detector, which needs cgo's C compiler.
  [gcc]=gcc
  # The unit suite drives the plugin through the real kubectl (plugin discovery on PATH);
  # Debian's kubernetes-client (1.20) dispatches plugins as later versions do.
  [kubectl]=kubernetes-client
)
want=()
for cmd in "${!pkg_of[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || want+=("${pkg_of[$cmd]}")
done
[ -d /usr/lib/cni ] || want+=(containernetworking-plugins)
if [ ${#want[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing packages: ${want[*]}; run as root or: sudo apt-get install -y ${want[*]}" >&2
  exit 1
fi
echo "installing: ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${want[@]}" >/dev/null || {
  apt-get update >/dev/null
  apt-get install -y --no-install-recommends "${want[@]}" >/dev/null
}
