#!/bin/bash
# Records ofproto/trace outputs of a small pipeline on a throwaway OVS
# (userspace datapath) in network namespace rec-n1. See README.md.
# Usage: record-ovs.sh OUTDIR   (run as root; deletes what it made on exit)
set -euo pipefail
OUT=$(realpath "${1:-.}")
NS=rec-n1
D=/tmp/rec-ovs
export OVS_RUNDIR=$D/run OVS_DBDIR=$D/db OVS_LOGDIR=$D/log OVS_SYSCONFDIR=$D/etc OVS_PKGDATADIR=$(dirname "${OVS_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}")
cleanup() {
  for p in ovs-vswitchd ovsdb-server; do
    [ -f "$OVS_RUNDIR/$p.pid" ] && kill "$(cat "$OVS_RUNDIR/$p.pid")" 2>/dev/null || true
  done
  ip netns del $NS 2>/dev/null || true
  rm -rf $D
}
trap cleanup EXIT
cleanup
mkdir -p $OVS_RUNDIR $OVS_DBDIR $OVS_LOGDIR $OVS_SYSCONFDIR
ip netns add $NS
nsx() { ip netns exec $NS "$@"; }
nsx ip link set lo up
ovsdb-tool create $OVS_DBDIR/conf.db "${OVS_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}"
nsx ovsdb-server $OVS_DBDIR/conf.db --remote=punix:$OVS_RUNDIR/db.sock --pidfile=$OVS_RUNDIR/ovsdb-server.pid --detach --log-file
vs() { nsx ovs-vsctl --db=unix:$OVS_RUNDIR/db.sock "$@"; }
vs --no-wait init
nsx ovs-vswitchd unix:$OVS_RUNDIR/db.sock --pidfile=$OVS_RUNDIR/ovs-vswitchd.pid --detach --log-file
of() { nsx ovs-ofctl -O OpenFlow15 "$@"; }
app() { nsx ovs-appctl -t $OVS_RUNDIR/ovs-vswitchd.$(cat $OVS_RUNDIR/ovs-vswitchd.pid).ctl "$@"; }

# Underlay: br-phy owns 172.31.77.1 and an uplink veth; the peer is 172.31.77.2.
vs add-br br-phy -- set bridge br-phy datapath_type=netdev
nsx ip link add upl0 type veth peer name upl1
nsx ip link set upl0 up; nsx ip link set upl1 up
vs add-port br-phy upl0 -- set interface upl0 ofport_request=1
nsx ip addr add 172.31.77.1/24 dev br-phy
nsx ip link set br-phy up
app tnl/neigh/set br-phy 172.31.77.2 02:00:ac:1f:4d:02

# br-int: two pods, a gateway (internal), a Geneve tunnel with remote_ip=flow.
vs add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure
for i in 1 2; do
  nsx ip link add pod$i type veth peer name pod$i-c
  nsx ip link set pod$i up; nsx ip link set pod$i-c up
done
vs add-port br-int pod1 -- set interface pod1 ofport_request=1 -- set port pod1 external_ids:pod-name=pod-a external_ids:pod-namespace=rec
vs add-port br-int pod2 -- set interface pod2 ofport_request=2 -- set port pod2 external_ids:pod-name=pod-b external_ids:pod-namespace=rec
vs add-port br-int gw0 -- set interface gw0 type=internal ofport_request=3
vs add-port br-int tun0 -- set interface tun0 type=geneve ofport_request=100 options:remote_ip=flow options:key=flow
for p in pod1 pod2 gw0 tun0; do
  [ "$(vs get interface $p ofport)" != -1 ] || { echo "port $p failed" >&2; exit 1; }
done

# The pipeline. Pod A is 172.31.1.1 on port 1, pod B 172.31.1.2 on port 2,
# the gateway 172.31.1.254 on port 3, the other node's pods 172.31.2.0/24
# behind the tunnel to 172.31.77.2, a Service 172.31.100.100:80 whose
# endpoints are pod A and pod B.
cat > $D/flows <<'FLOWS'
table=0,priority=100,in_port=1,actions=set_field:0x1->reg0,resubmit(,30),resubmit(,1)
table=0,priority=100,in_port=2,actions=set_field:0x2->reg0,resubmit(,30),resubmit(,1)
table=0,priority=100,in_port=100,actions=set_field:0x3->reg0,goto_table:1
table=30,priority=10,ip,nw_src=172.31.9.9,actions=set_field:0x1->reg9
table=1,priority=200,tcp,nw_dst=172.31.100.100,tp_dst=80,actions=group:1
table=1,priority=100,ip,nw_dst=172.31.1.1,actions=set_field:0x1->reg1,goto_table:15
table=1,priority=100,ip,nw_dst=172.31.1.2,actions=set_field:0x2->reg1,goto_table:15
table=1,priority=100,ip,nw_dst=172.31.1.254,actions=output:LOCAL
table=1,priority=100,ip,nw_dst=172.31.1.255,actions=output:1,output:2
table=1,priority=90,ip,nw_dst=172.31.2.0/24,actions=set_field:172.31.77.2->tun_dst,set_field:0x64->reg1,goto_table:20
table=1,priority=10,ip,nw_dst=172.31.0.0/16,actions=output:3
table=12,priority=100,reg3=0xa,tcp,actions=set_field:172.31.1.1->ip_dst,set_field:0x1->reg1,goto_table:15
table=12,priority=100,reg3=0xb,tcp,actions=set_field:172.31.1.2->ip_dst,set_field:0x2->reg1,goto_table:15
table=15,priority=200,tcp,tp_dst=81,actions=drop
table=15,priority=200,tcp,tp_dst=82,actions=controller(userdata=01.02,id=0)
table=15,priority=0,actions=goto_table:20
table=20,priority=210,reg1=0x1,in_port=1,actions=IN_PORT
table=20,priority=200,actions=output:NXM_NX_REG1[]
FLOWS
of add-group br-int 'group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,actions=set_field:0xa->reg3,resubmit(,12),bucket=bucket_id:1,actions=set_field:0xb->reg3,resubmit(,12)'
of add-flows br-int $D/flows
sleep 1

A=02:00:ac:1f:01:01
tr() { # NAME FLOW...: trace a TCP SYN from pod A
  local name=$1; shift
  app ofproto/trace br-int "$@" > "$OUT/$name.txt"
}
SYN="tcp,dl_src=$A,dl_dst=02:00:ac:1f:01:fe,nw_src=172.31.1.1,nw_ttl=64,tp_src=40000,tcp_flags=syn"
tr ovs-delivered   "in_port=1,$SYN,nw_dst=172.31.1.2,tp_dst=80"
tr ovs-tunnel      "in_port=1,$SYN,nw_dst=172.31.2.7,tp_dst=80"
tr ovs-drop        "in_port=1,$SYN,nw_dst=172.31.1.2,tp_dst=81"
tr ovs-reject      "in_port=1,$SYN,nw_dst=172.31.1.2,tp_dst=82"
tr ovs-nomatch     "in_port=1,$SYN,nw_dst=192.0.2.1,tp_dst=80"
tr ovs-local       "in_port=1,$SYN,nw_dst=172.31.1.254,tp_dst=80"
tr ovs-gateway     "in_port=1,$SYN,nw_dst=172.31.5.5,tp_dst=80"
tr ovs-multi       "in_port=1,$SYN,nw_dst=172.31.1.255,tp_dst=80"
tr ovs-service     "in_port=1,$SYN,nw_dst=172.31.100.100,tp_dst=80"
# The continuation after the dp_hash group, as the helper traces it: a
# trampoline in table 0 takes only the traced packet (pkt_mark) to the
# table where the real packet went on, with the register the bucket set.
of add-flow br-int 'table=0,priority=65535,pkt_mark=0x74661000,actions=set_field:0->pkt_mark,resubmit(,12)'
tr ovs-service-hairpin "in_port=1,pkt_mark=0x74661000,reg3=0xa,$SYN,nw_dst=172.31.100.100,tp_dst=80"
tr ovs-service-other   "in_port=1,pkt_mark=0x74661000,reg3=0xb,$SYN,nw_dst=172.31.100.100,tp_dst=80"
app dpif/show > "$OUT/dpif-show-ovs.txt"
of dump-flows br-int > "$OUT/ovs-flows.txt"
of dump-groups br-int >> "$OUT/ovs-flows.txt"
