#!/bin/bash
# Records ofproto/trace outputs of real OVN (Debian ovn-central/ovn-host
# 23.03, OVS 3.1, userspace datapath) on two chassis in network namespaces
# rec-n1 and rec-n2, shaped as OVN-Kubernetes shapes a cluster. See README.md.
# Usage: record-ovn.sh OUTDIR   (run as root; deletes what it made on exit)
set -euo pipefail
OUT=$(realpath "${1:-.}")
D=/tmp/rec-ovn
C=$D/central
cleanup() {
  for f in $(ls $D/*/*.pid $D/*/*/*.pid 2>/dev/null); do kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.5
  ip netns del rec-n1 2>/dev/null || true
  ip netns del rec-n2 2>/dev/null || true
  rm -rf $D
}
trap cleanup EXIT
cleanup
# The two chassis, the pods, the ACL and the load balancers.
. "$(dirname "$0")/ovn-chassis.sh"

app() { local i=$1; shift; node $i ovs-appctl -t $D/n$i/run/ovs-vswitchd.$(cat $D/n$i/run/ovs-vswitchd.pid).ctl "$@"; }
ofport() { node $1 ovs-vsctl get interface $2 ofport; }
A=$(ofport 1 pod-a)
SYN="tcp,dl_src=$(mac 172.31.10.5),nw_src=172.31.10.5,nw_ttl=64,tp_src=40000,tcp_flags=syn"
app 1 ofproto/trace br-int "in_port=$A,$SYN,dl_dst=$(mac 172.31.10.1),nw_dst=172.31.20.6,tp_dst=80" > $OUT/ovn-cross-node.txt
app 1 ofproto/trace br-int "in_port=$A,$SYN,dl_dst=$(mac 172.31.10.7),nw_dst=172.31.10.7,tp_dst=80" > $OUT/ovn-same-node.txt
app 1 ofproto/trace br-int "in_port=$A,$SYN,dl_dst=$(mac 172.31.10.1),nw_dst=172.31.200.10,tp_dst=80" > $OUT/ovn-lb.txt
app 1 ofproto/trace br-int "in_port=$A,$SYN,dl_dst=$(mac 172.31.10.1),nw_dst=172.31.200.11,tp_dst=80" > $OUT/ovn-lb-one.txt
# The receiver: the packet as it arrives from the tunnel, with the tunnel
# key and tun_metadata0 (logical in/out ports) node 1 put on it.
TUN=$(node 2 ovs-vsctl --bare --columns=ofport find interface type=geneve)
for dport in 80 81 82; do
  app 1 ofproto/trace br-int "in_port=$A,$SYN,dl_dst=$(mac 172.31.10.1),nw_dst=172.31.20.6,tp_dst=$dport" > $D/sender.txt
  # The Geneve header in the sender's datapath actions: vni and the option.
  tid=$(grep -o 'vni=0x[0-9a-f]*' $D/sender.txt | tail -1 | cut -d= -f2)
  md=$(grep -o 'len=4,0x[0-9a-f]*' $D/sender.txt | tail -1 | cut -d, -f2)
  flow="in_port=$TUN,tun_id=$tid,tun_src=172.31.88.1,tun_dst=172.31.88.2,tun_metadata0=$md,tcp,dl_src=$(mac 172.31.20.1),dl_dst=$(mac 172.31.20.6),nw_src=172.31.10.5,nw_dst=172.31.20.6,nw_ttl=63,tp_src=40000,tp_dst=$dport,tcp_flags=syn"
  case $dport in 80) name=ovn-receiver;; 81) name=ovn-acl-drop;; 82) name=ovn-acl-reject;; esac
  app 2 ofproto/trace br-int "$flow" > $OUT/$name.txt
done
# What pod A's ARP for its gateway and for pod C (on-link) is answered
# with: OVN's switch answers both itself.
ARP="arp,dl_src=$(mac 172.31.10.5),dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,arp_spa=172.31.10.5,arp_sha=$(mac 172.31.10.5),arp_tha=00:00:00:00:00:00"
app 1 ofproto/trace br-int "in_port=$A,$ARP,arp_tpa=172.31.10.1" > $OUT/ovn-arp-gateway.txt
app 1 ofproto/trace br-int "in_port=$A,$ARP,arp_tpa=172.31.10.7" > $OUT/ovn-arp-onlink.txt
# The southbound and northbound rows behind the cookies, as they were
# when the traces above were taken (engine's naming tests read them).
$SB -f json --columns=_uuid,logical_datapath,logical_dp_group,pipeline,table_id,priority,match,actions,external_ids list Logical_Flow > $OUT/ovn-sb-logical-flow.json
$SB -f json --columns=_uuid,tunnel_key,external_ids list Datapath_Binding > $OUT/ovn-sb-datapath-binding.json
$SB -f json --columns=_uuid,datapaths list Logical_DP_Group > $OUT/ovn-sb-logical-dp-group.json
$SB -f json --columns=_uuid,logical_port,type,datapath list Port_Binding > $OUT/ovn-sb-port-binding.json
$NB -f json --columns=_uuid,direction,priority,match,action,external_ids list ACL > $OUT/ovn-nb-acl.json
$NB -f json --columns=_uuid,name,external_ids list Load_Balancer > $OUT/ovn-nb-load-balancer.json
app 1 dpif/show > $OUT/dpif-show-ovn-n1.txt
app 2 dpif/show > $OUT/dpif-show-ovn-n2.txt
node 1 ovs-vsctl --columns=name,ofport,external_ids list interface > $OUT/ovn-n1-interfaces.txt
node 2 ovs-vsctl --columns=name,ofport,external_ids list interface > $OUT/ovn-n2-interfaces.txt
$SB --uuid lflow-list > $D/lflows.txt
grep -n "reject\|tcp_reset\|icmp4 {" $D/lflows.txt | head -5 || true
node 2 ovs-ofctl dump-flows br-int | grep -i "controller(userdata=00.00.00.16" | head -3 || true
