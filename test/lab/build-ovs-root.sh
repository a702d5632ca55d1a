#!/usr/bin/env bash
# Unpacks the Open vSwitch 4.0 and OVN 26.03 that the ovn-kubernetes fixture
# carries into a private root, once per set of packages (6 to 40 s cold).
# Output (stdout): $OVS_ROOT_CACHE/KEY, holding
#   root/     the 68 Debian packages unpacked with dpkg -x (never installed:
#             they need glibc 2.43, and installing them would upgrade the host's)
#   ovs-bin/  one wrapper a command (ovs-vswitchd, ovsdb-server, ovs-vsctl, ...)
#             that runs it through root's own loader and libraries; a mode puts
#             it first on PATH to run this OVS instead of the host's.
#   ovn-bin/  the same for OVN 26.03 (ovn-northd, ovn-controller, ovn-nbctl,
#             ovn-sbctl, ovn-appctl, ovn-trace, ovn-detrace) and sid's nft: the
#             genuine OVN-Kubernetes refuses Debian 12's OVN 23.03 (its NB/SB
#             models match 26.03) and shells out to nft. Apart from ovs-bin so
#             that the OVN mode, which keeps Debian's OVN, puts only ovs-bin on
#             PATH; the ovnk mode puts ovn-bin first, then ovs-bin (the ovsdb
#             tools are there).
# KEY is the start of the sum of debs.sha256, which names every package by its
# own sum (other packages, another directory), and the layout's version.
#
# Why not Debian 12's OVS 3.1.0: its userspace conntrack aborts
# (lib/conntrack.c:1063) under OVN's load balancers with ordinary traffic,
# and nothing restarts it (notes/LAB-FACTS.md); 4.0 carries the fix.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=lib/fixture.sh
. "$here/lib/fixture.sh"
fixture=${OVNK_FIXTURE:-$(dirname "$(fixture ovn-kubernetes/debs.sha256)")}
if [ ! -f "$fixture/debs.sha256" ]; then
  echo "the ovn-kubernetes fixture (debs.sha256 and debs/) not found at $fixture: the lab's OVN modes run its Open vSwitch (set OVNK_FIXTURE)" >&2
  exit 1
fi
# The layout's version is in the key because a directory is complete once its
# .complete exists: one made before ovn-bin/ existed (layout 1) has .complete
# and no ovn-bin/, and would be taken for done. Bump it whenever what the
# script writes changes; the old directory stays for an older checkout.
layout=2
key=$(sha256sum "$fixture/debs.sha256" | cut -c1-16)-l$layout
cache=${OVS_ROOT_CACHE:-${CACHE_DIR:-/var/cache/kubectl-traceflow}/ovs-root}
out=$cache/$key
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
mkdir -p "$cache"
# One unpacking at a time per cache (CI and a developer's lab-up may race).
exec 9>"$cache/.build-$key.lock"
flock 9
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
start=$(date +%s)
echo "unpacking the fixture's Open vSwitch and OVN into $out (cold: up to 40 s)" >&2
(cd "$fixture/debs" && sha256sum --quiet -c ../debs.sha256) ||
  { echo "the fixture's packages do not match $fixture/debs.sha256" >&2; exit 1; }
work=$(mktemp -d "$cache/.$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/ovs-bin" "$work/ovn-bin"
for deb in "$fixture"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
r=$out/root
ld=usr/lib64/ld-linux-x86-64.so.2
[ -e "$work/root/$ld" ] || { echo "no loader $ld in the fixture's packages" >&2; exit 1; }
# wrap DIR CMD: DIR/NAME runs root's CMD through root's loader and libraries.
wrap() {
  local cmd=$2 name=${2##*/}
  [ -x "$work/root/$cmd" ] || { echo "no $cmd in the fixture's packages" >&2; exit 1; }
  # exec keeps the PID: the lab records a daemon's PID when it starts it.
  cat >"$work/$1/$name" <<EOF
#!/bin/sh
exec $r/$ld --library-path $r/usr/lib/x86_64-linux-gnu --argv0 $name $r/$cmd "\$@"
EOF
  chmod 755 "$work/$1/$name"
}
# Debian keeps ovs-vswitchd beside its alternatives; the others are on the usual paths.
for cmd in usr/lib/openvswitch-switch/ovs-vswitchd usr/sbin/ovsdb-server usr/bin/ovsdb-tool usr/bin/ovsdb-client \
  usr/bin/ovs-vsctl usr/bin/ovs-ofctl usr/bin/ovs-appctl usr/bin/ovs-dpctl; do
  wrap ovs-bin "$cmd"
done
for cmd in usr/bin/ovn-northd usr/bin/ovn-controller usr/bin/ovn-nbctl usr/bin/ovn-sbctl usr/bin/ovn-appctl \
  usr/bin/ovn-trace usr/sbin/nft; do
  wrap ovn-bin "$cmd"
done
# ovn-detrace is a Python script needing Open vSwitch's Python library, which
# the fixture lacks (no python3-openvswitch among its packages): it runs on the
# host's Python with Debian 12's python3-openvswitch (3.1's library speaks the
# OVSDB protocol to 26.03's databases as well).
if [ -f "$work/root/usr/bin/ovn-detrace" ]; then
  cat >"$work/ovn-bin/ovn-detrace" <<EOF
#!/bin/sh
exec /usr/bin/python3 $r/usr/bin/ovn-detrace "\$@"
EOF
  chmod 755 "$work/ovn-bin/ovn-detrace"
fi
# A directory left by a run killed before .complete would swallow $work.
rm -rf "$out"
mv "$work" "$out"
trap 'rm -rf "$out"' EXIT
# The wrappers name root by its final path: check each there before calling it
# done. (Output captured, not piped to grep -q: under pipefail grep's early
# exit could fail a good command by SIGPIPE.)
for w in "$out"/ovs-bin/* "$out"/ovn-bin/*; do
  name=${w##*/}
  case $name in
  ovn-detrace)
    # Needs python3-openvswitch on the host (Debian 12's openvswitch-common
    # brings it); without it the wrapper stays and says so when run.
    /usr/bin/python3 -c 'import ovs' 2>/dev/null || {
      echo "warning: ovn-detrace needs the host's python3-openvswitch (apt-get install python3-openvswitch); not checked" >&2
      continue
    }
    want='(OVN) 26.03' ;;
  ovn-*) want='26.03' ;;
  nft) want='nftables v1.' ;;
  *) want='(Open vSwitch) 4.' ;;
  esac
  if ! v=$("$w" --version 2>&1) || [[ $v != *"$want"* ]]; then
    echo "the unpacked $name does not run: ${v%%$'\n'*}" >&2
    exit 1
  fi
done
trap - EXIT
: >"$out/.complete"
echo "unpacked in $(($(date +%s) - start))s" >&2
echo "$out"
