# Sourced by record-ovn.sh and test/lab/ovs-conntrack-crash.sh: real OVN
# (Debian ovn-central/ovn-host 23.03, OVS 3.1 or the OVS first on PATH with
# OVS_SCHEMA, userspace datapath) on two
# chassis in network namespaces rec-n1 and rec-n2, shaped as OVN-Kubernetes
# shapes a cluster, with pods A and C on node 1 and B on node 2, an ACL and
# two load balancers. Expects D (its directory) and C ($D/central) set, and
# defines node, mac and pod for the caller. NOLB=1 leaves the load
# balancers out.
mkdir -p $C
export OVN_RUNDIR=$C OVN_LOGDIR=$C OVN_DBDIR=$C
ovsdb-tool create $C/nb.db /usr/share/ovn/ovn-nb.ovsschema
ovsdb-tool create $C/sb.db /usr/share/ovn/ovn-sb.ovsschema
for db in nb sb; do
  ovsdb-server $C/$db.db --remote=punix:$C/$db.sock --pidfile=$C/$db.pid --unixctl=$C/$db.ctl --detach --log-file=$C/$db.log
done
NB="ovn-nbctl --db=unix:$C/nb.sock"
SB="ovn-sbctl --db=unix:$C/sb.sock"
$NB init; $SB init
ovn-northd --ovnnb-db=unix:$C/nb.sock --ovnsb-db=unix:$C/sb.sock --pidfile=$C/northd.pid --detach --log-file=$C/northd.log

# Node i: its own OVS in rec-n$i, the node IP 172.31.88.i on br-phy (native
# tunnel), ovn-controller.
ip link add rec-e1 type veth peer name rec-e2
for i in 1 2; do
  N=$D/n$i; mkdir -p $N/run $N/db $N/log $N/etc $N/ovn
  ip netns add rec-n$i
  ip link set rec-e$i netns rec-n$i
done
node() { # I CMD...: run in node I's namespace with its OVS and OVN dirs
  local i=$1; shift
  OVS_RUNDIR=$D/n$i/run OVS_DBDIR=$D/n$i/db OVS_LOGDIR=$D/n$i/log OVS_SYSCONFDIR=$D/n$i/etc \
  OVN_RUNDIR=$D/n$i/ovn OVN_LOGDIR=$D/n$i/log ip netns exec rec-n$i "$@"
}
for i in 1 2; do
  N=$D/n$i; j=$((3 - i))
  node $i ip link set lo up
  node $i sysctl -qw net.ipv4.conf.all.arp_ignore=1
  ovsdb-tool create $N/db/conf.db "${OVS_SCHEMA:-/usr/share/openvswitch/vswitch.ovsschema}"
  node $i ovsdb-server $N/db/conf.db --remote=punix:$N/run/db.sock --pidfile=$N/run/ovsdb-server.pid --detach --log-file
  node $i ovs-vsctl --no-wait init
  node $i ovs-vswitchd unix:$N/run/db.sock --pidfile=$N/run/ovs-vswitchd.pid --detach --log-file
  node $i ovs-vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev other_config:hwaddr=02:00:ac:1f:58:0$i \
    -- add-port br-phy rec-e$i
  node $i ip link set rec-e$i up
  node $i ip addr add 172.31.88.$i/24 dev br-phy
  node $i ip link set br-phy up
  node $i ovs-vsctl set open . external_ids:system-id=rec-node$i external_ids:hostname=rec-node$i \
    external_ids:ovn-remote=unix:$C/sb.sock external_ids:ovn-encap-type=geneve \
    external_ids:ovn-encap-ip=172.31.88.$i external_ids:ovn-bridge=br-int \
    external_ids:ovn-bridge-datapath-type=netdev
  node $i ovn-controller unix:$N/run/db.sock --pidfile=$N/ovn/ovn-controller.pid --detach --log-file
done
for i in 1 2; do
  node $i ovs-appctl -t $D/n$i/run/ovs-vswitchd.$(cat $D/n$i/run/ovs-vswitchd.pid).ctl \
    tnl/neigh/set br-phy 172.31.88.$((3 - i)) 02:00:ac:1f:58:0$((3 - i))
done

# OVN-Kubernetes' shape: ovn_cluster_router, a switch per node with its pod
# subnet (node 1 172.31.10.0/24, node 2 172.31.20.0/24), pods NAMESPACE_POD.
mac() { printf '0a:58:%02x:%02x:%02x:%02x' $(echo "$1" | tr . ' '); }
$NB lr-add ovn_cluster_router
for i in 1 2; do
  gw=172.31.${i}0.1
  $NB lrp-add ovn_cluster_router rtos-rec-node$i $(mac $gw) $gw/24
  $NB ls-add rec-node$i -- set logical_switch rec-node$i other_config:subnet=172.31.${i}0.0/24
  $NB lsp-add rec-node$i stor-rec-node$i -- lsp-set-type stor-rec-node$i router \
    -- lsp-set-addresses stor-rec-node$i router -- lsp-set-options stor-rec-node$i router-port=rtos-rec-node$i
done
pod() { # NODE NAME IP
  local i=$1 name=$2 ip=$3 m; m=$(mac $3)
  $NB lsp-add rec-node$i rec_$name -- lsp-set-addresses rec_$name "$m $ip" \
    -- lsp-set-port-security rec_$name "$m $ip" -- lsp-set-options rec_$name requested-chassis=rec-node$i
  node $i ip link add $name type veth peer name $name-c
  node $i ip link set $name up
  node $i ovs-vsctl add-port br-int $name -- set interface $name external_ids:iface-id=rec_$name \
    external_ids:attached_mac=$m external_ids:ip_addresses=$ip/24 external_ids:iface-id-ver=1 external_ids:sandbox=rec-$name
}
pod 1 pod-a 172.31.10.5
pod 1 pod-c 172.31.10.7
pod 2 pod-b 172.31.20.6
# A NetworkPolicy as OVN-Kubernetes writes one: to-lport ACLs on pod B's switch.
$NB acl-add rec-node2 to-lport 1001 'outport == "rec_pod-b" && tcp.dst == 81' drop
$NB acl-add rec-node2 to-lport 1001 'outport == "rec_pod-b" && tcp.dst == 82' reject
# Services: load balancers on the node switches (and the router), as OVN-Kubernetes does.
[ -n "${NOLB:-}" ] || $NB lb-add rec-svc 172.31.200.10:80 172.31.20.6:80,172.31.10.7:80 tcp
[ -n "${NOLB:-}" ] || $NB lb-add rec-svc1 172.31.200.11:80 172.31.20.6:80 tcp
[ -n "${NOLB:-}" ] || for lb in rec-svc rec-svc1; do
  $NB ls-lb-add rec-node1 $lb; $NB ls-lb-add rec-node2 $lb; $NB lr-lb-add ovn_cluster_router $lb
done
# The Kubernetes objects behind the rows, in OVN-Kubernetes' external_ids.
for u in $($NB --bare --columns=_uuid list ACL); do
  $NB set ACL "$u" 'external_ids:"k8s.ovn.org/owner-type"=NetworkPolicy' 'external_ids:"k8s.ovn.org/name"="rec:deny-b"'
done
[ -n "${NOLB:-}" ] || $NB set Load_Balancer rec-svc 'external_ids:"k8s.ovn.org/owner-type"=Service' 'external_ids:"k8s.ovn.org/name"="rec/svc"'
[ -n "${NOLB:-}" ] || $NB set Load_Balancer rec-svc1 'external_ids:"k8s.ovn.org/owner-type"=Service' 'external_ids:"k8s.ovn.org/name"="rec/svc1"'
$NB --wait=hv --timeout=30 sync
sleep 1
