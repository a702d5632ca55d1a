#!/usr/bin/env bash
# Unpacks the Open vSwitch 4.0 (and OVN 26.03) that the ovn-kubernetes fixture
# carries into a private root, once per set of packages (about 40 s cold).
# Output (stdout): $OVS_ROOT_CACHE/KEY, holding
#   root/     the 68 Debian packages unpacked with dpkg -x (never installed:
#             they need glibc 2.43, and installing them would upgrade the host's)
#   ovs-bin/  one wrapper a command (ovs-vswitchd, ovsdb-server, ovs-vsctl, ...)
#             that runs it through root's own loader and libraries; a mode puts
#             it first on PATH to run this OVS instead of the host's.
# KEY is the start of the sum of debs.sha256, which names every package by its
# own sum: other packages, another directory.
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
key=$(sha256sum "$fixture/debs.sha256" | cut -c1-16)
cache=${OVS_ROOT_CACHE:-${CACHE_DIR:-/var/cache/kubectl-traceflow}/ovs-root}
out=$cache/$key
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
mkdir -p "$cache"
# One unpacking at a time per cache (CI and a developer's lab-up may race).
exec 9>"$cache/.build-$key.lock"
flock 9
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
start=$(date +%s)
echo "unpacking the fixture's Open vSwitch and OVN into $out (cold: about 40 s)" >&2
(cd "$fixture/debs" && sha256sum --quiet -c ../debs.sha256) ||
  { echo "the fixture's packages do not match $fixture/debs.sha256" >&2; exit 1; }
work=$(mktemp -d "$cache/.$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/ovs-bin"
for deb in "$fixture"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
r=$out/root
ld=usr/lib64/ld-linux-x86-64.so.2
[ -e "$work/root/$ld" ] || { echo "no loader $ld in the fixture's packages" >&2; exit 1; }
# Debian keeps ovs-vswitchd beside its alternatives; the others are on the usual paths.
for cmd in usr/lib/openvswitch-switch/ovs-vswitchd usr/sbin/ovsdb-server usr/bin/ovsdb-tool usr/bin/ovsdb-client \
  usr/bin/ovs-vsctl usr/bin/ovs-ofctl usr/bin/ovs-appctl usr/bin/ovs-dpctl; do
  [ -x "$work/root/$cmd" ] || { echo "no $cmd in the fixture's packages" >&2; exit 1; }
  name=${cmd##*/}
  # exec keeps the PID: the lab records a daemon's PID when it starts it.
  cat >"$work/ovs-bin/$name" <<EOF
#!/bin/sh
exec $r/$ld --library-path $r/usr/lib/x86_64-linux-gnu --argv0 $name $r/$cmd "\$@"
EOF
  chmod 755 "$work/ovs-bin/$name"
done
mv "$work" "$out"
trap - EXIT
# The wrappers name root by its final path: check one before calling it done.
"$out/ovs-bin/ovs-vswitchd" --version | grep -q 'Open vSwitch) 4\.' ||
  { echo "the unpacked ovs-vswitchd does not run: $("$out/ovs-bin/ovs-vswitchd" --version 2>&1 | head -1)" >&2; rm -rf "$out"; exit 1; }
: >"$out/.complete"
echo "unpacked in $(($(date +%s) - start))s" >&2
echo "$out"
