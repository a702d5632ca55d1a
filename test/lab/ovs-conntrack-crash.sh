#!/bin/bash
# Reproduces an ovs-vswitchd crash of OVS 3.1's userspace conntrack under
# OVN with plain pod traffic, no traceflow helper involved:
#   lib/conntrack.c:1063: assertion conn->conn_type == CT_CONN_TYPE_DEFAULT
#   failed in conn_update_state()
# The setup is record-ovn.sh's (pkg/nodehelper/ofproto/testdata): two chassis
# in network namespaces rec-n1/rec-n2 (OVN 23.03, OVS 3.1, datapath netdev),
# OVN-Kubernetes' shape, load balancers on the node switches and the router.
# Pods get network namespaces (rec-pod-a, rec-pod-b, rec-pod-c) with an HTTP
# server each; pod C asks pod B over HTTP in a loop for SECONDS and the script
# reports whether node 1's ovs-vswitchd survived.
# Usage: ovs-conntrack-crash.sh [SECONDS]   (root; deletes what it made on exit)
#   NOLB=1: without the load balancers (the control: no NAT'd conntrack)
#   HAIRPIN=1: also a load balancer whose only backend is pod A, and
#     options:hairpin_snat_ip on every load balancer, as OVN-Kubernetes sets it
set -euo pipefail
SECS=${1:-90}
D=/tmp/rec-ovn
C=$D/central
cleanup() {
  for f in $(ls $D/*/*.pid $D/*/*/*.pid 2>/dev/null); do kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.5
  ip netns del rec-n1 2>/dev/null || true
  ip netns del rec-n2 2>/dev/null || true
  for p in pod-a pod-b pod-c; do ip netns del rec-$p 2>/dev/null || true; done
  rm -rf $D
}
trap cleanup EXIT
cleanup
# The two chassis, pods A, B and C, the ACL and (unless NOLB) the load balancers.
. "$(dirname "$0")/../../pkg/nodehelper/ofproto/testdata/ovn-chassis.sh"

# Pods: the container ends of the veths in their own namespaces.
podns() { # NODE NAME IP GATEWAY
  local i=$1 name=$2 ip=$3 gw=$4
  ip netns add rec-$name
  node $i ip link set $name-c netns rec-$name
  ip netns exec rec-$name ip link set lo up
  ip netns exec rec-$name ip link set $name-c address "$(mac $ip)" mtu 1400 up
  ip netns exec rec-$name ip addr add $ip/24 dev $name-c
  ip netns exec rec-$name ip route add 172.31.0.0/16 via $gw
  ip netns exec rec-$name ethtool -K $name-c tx off >/dev/null
  node $i ethtool -K $name tx off >/dev/null
}
podns 1 pod-a 172.31.10.5 172.31.10.1
podns 1 pod-c 172.31.10.7 172.31.10.1
podns 2 pod-b 172.31.20.6 172.31.20.1
if [ -n "${HAIRPIN:-}" ] && [ -z "${NOLB:-}" ]; then
  $NB lb-add rec-hp 172.31.200.12:80 172.31.10.5:80 tcp
  $NB ls-lb-add rec-node1 rec-hp; $NB ls-lb-add rec-node2 rec-hp; $NB lr-lb-add ovn_cluster_router rec-hp
  for lb in rec-svc rec-svc1 rec-hp; do $NB set Load_Balancer $lb options:hairpin_snat_ip=169.254.169.5; done
  $NB --wait=hv --timeout=30 sync
fi
for p in a b c; do
  ip netns exec rec-pod-$p python3 -m http.server 80 --bind 0.0.0.0 >/dev/null 2>&1 &
  echo $! > $C/http-$p.pid
done
sleep 1
pid=$(cat $D/n1/run/ovs-vswitchd.pid)
echo "$(ovs-vswitchd --version | head -1), $(ovn-controller --version | head -1): pod C asks pod B for $SECS s"
start=$SECONDS ok=0 failed=0
while [ $((SECONDS - start)) -lt "$SECS" ] && kill -0 "$pid" 2>/dev/null; do
  if ip netns exec rec-pod-c curl -s -m 2 -o /dev/null http://172.31.20.6/; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
done
sleep 1
if grep -q 'EMER' $D/n1/log/ovs-vswitchd.log; then
  echo "node 1's ovs-vswitchd died after $((SECONDS - start)) s, $ok requests answered, $failed failed:"
  grep EMER $D/n1/log/ovs-vswitchd.log
  exit 1
fi
echo "node 1's ovs-vswitchd (pid $pid) alive after $((SECONDS - start)) s: $ok requests answered, $failed failed"
