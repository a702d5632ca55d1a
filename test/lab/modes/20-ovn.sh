# shellcheck shell=bash
# OVN mode (TFLAB_CNI=ovn): real OVN from Debian's ovn-central and ovn-host,
# shaped as OVN-Kubernetes' interconnect mode shapes a node. On the host: the
# NB and SB ovsdb-servers, ovn-northd and the lab's controller lab-ovnkube
# (the role ovnkube-controller plays). Per node: ovn-controller, which makes
# br-int, its Geneve ports and every flow on it, and the management port
# ovn-k8s-mp0. The lab writes no flow itself in this mode.
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here;
# the hooks it calls (mode_ovn_*, described in 10-lab.sh) are at the end.

# Central files live in $OVN_DIR; a node sees the two database sockets at the
# paths OVN-Kubernetes' interconnect mode uses (OVN_NODE_RUN, below).
OVN_DIR=$S/ovn
# OVN-Kubernetes' Geneve carries an 8-byte option: 58 bytes of overhead.
OVN_MTU=1400
# OVN-Kubernetes' V4OVNServiceHairpinMasqueradeIP: lab-ovnkube's load
# balancers rewrite the source of a pod reaching itself through a Service to
# it, so pods must route it back through OVN (they have no default route).
OVN_HAIRPIN_IP=169.254.169.5

# ovn_mac IP: OVN-Kubernetes' MAC for an address, 0a:58 and the IP's bytes.
ovn_mac() { local IFS=.; set -- $1; printf '0a:58:%02x:%02x:%02x:%02x' "$1" "$2" "$3" "$4"; }
ovn_gw() { echo "10.244.$1.1"; }
ovn_mgmt_ip() { echo "10.244.$1.2"; }
nbctl() { ovn-nbctl --db="unix:$OVN_DIR/ovnnb_db.sock" "$@"; }
sbctl() { ovn-sbctl --db="unix:$OVN_DIR/ovnsb_db.sock" "$@"; }

# ovn_central: both databases and ovn-northd, as members of the lab's cgroup
# (started with `start`, so down finds them). The sockets must exist before
# the nodes are made: node_ns binds them into each node.
ovn_central() {
  mkdir -p "$OVN_DIR"
  local db
  for db in nb sb; do
    ovsdb-tool create "$OVN_DIR/ovn${db}_db.db" "/usr/share/ovn/ovn-$db.ovsschema"
    # The run and log directories are named so that nothing lands in the
    # host's /run/openvswitch or /var/log.
    start "ovn-$db-ovsdb" - env OVS_RUNDIR="$OVN_DIR" OVS_LOGDIR="$S/logs" OVS_DBDIR="$OVN_DIR" \
      ovsdb-server "$OVN_DIR/ovn${db}_db.db" --remote="punix:$OVN_DIR/ovn${db}_db.sock" \
      --pidfile="$OVN_DIR/ovn${db}_db.pid" --unixctl="$OVN_DIR/ovn${db}_db.ctl" \
      --log-file="$S/logs/ovn-$db-ovsdb.ovs.log"
  done
  poll "the OVN northbound database" 10 ovsdb_listening "$OVN_DIR/ovnnb_db.sock" || die "no NB database: see $S/logs/ovn-nb-ovsdb*.log"
  poll "the OVN southbound database" 10 ovsdb_listening "$OVN_DIR/ovnsb_db.sock" || die "no SB database: see $S/logs/ovn-sb-ovsdb*.log"
  nbctl init
  sbctl init
  start ovn-northd - env OVN_RUNDIR="$OVN_DIR" OVN_LOGDIR="$S/logs" \
    ovn-northd --ovnnb-db="unix:$OVN_DIR/ovnnb_db.sock" --ovnsb-db="unix:$OVN_DIR/ovnsb_db.sock" \
    --pidfile="$OVN_DIR/ovn-northd.pid" --unixctl="$OVN_DIR/ovn-northd.ctl" --log-file="$S/logs/ovn-northd.ovs.log"
}

# ovn_node_binds NODE_DIR: the mount commands (run inside the node's new mount
# namespace by node_ns) that give the node its /run/ovn: a directory of its own
# (ovn-controller's pid and control socket land there by default, as on a real
# node) with the central sockets bound over two files in it. A unix socket
# works through a bind mount; a whole-directory bind of $OVN_DIR would instead
# make both nodes' ovn-controllers share one run directory.
ovn_node_binds() {
  local nd=$1 f
  mkdir -p "$nd/ovn"
  for f in ovnnb_db.sock ovnsb_db.sock; do : >"$nd/ovn/$f"; done
  echo "mount --bind $nd/ovn /run/ovn;"
  for f in ovnnb_db.sock ovnsb_db.sock; do echo "mount --bind $OVN_DIR/$f /run/ovn/$f;"; done
}

# ovn_node I: the chassis. br-phy (holding the node IP, made by node_ovs) is
# the underlay; ovn-controller makes br-int and the tunnels.
ovn_node() {
  local i=$1 n ip gw mgmt
  n=$(node_name "$i") ip=$(node_ip "$i") gw=$(ovn_gw "$i") mgmt=$(ovn_mgmt_ip "$i")
  in_node "$n" ovs-vsctl --timeout=10 set Open_vSwitch . external_ids:system-id="$n" external_ids:hostname="$n" \
    external_ids:ovn-remote=unix:/var/run/ovn/ovnsb_db.sock external_ids:ovn-encap-type=geneve \
    external_ids:ovn-encap-ip="$ip" external_ids:ovn-bridge=br-int external_ids:ovn-bridge-datapath-type=netdev
  start "$n-ovn-controller" "$n" ovn-controller unix:/run/openvswitch/db.sock \
    --pidfile=/run/ovn/ovn-controller.pid --log-file="$S/logs/$n-ovn-controller.ovs.log"
  poll "$n's br-int from ovn-controller" 20 in_node "$n" ovs-vsctl br-exists br-int ||
    die "ovn-controller made no br-int on $n: see $S/logs/$n-ovn-controller.ovs.log"
  # The management port as OVN-Kubernetes makes it: bound to logical port
  # k8s-NODE (lab-ovnkube creates it with this MAC and the subnet's .2). The
  # node reaches pods and ClusterIPs through it (kubelet probes, hostNetwork
  # pods), via the router port .1.
  in_node "$n" bash -ec "
    ovs-vsctl --timeout=10 -- --may-exist add-port br-int ovn-k8s-mp0 \
      -- set Interface ovn-k8s-mp0 type=internal mtu_request=$OVN_MTU mac=\\\"$(ovn_mac "$mgmt")\\\" \
         external_ids:iface-id=k8s-$n
    # add-port exits 0 even when the port failed: check its OpenFlow number.
    [ \"\$(ovs-vsctl get Interface ovn-k8s-mp0 ofport)\" -gt 0 ] || { echo 'OVS port ovn-k8s-mp0 failed' >&2; exit 1; }
    ip link set ovn-k8s-mp0 address $(ovn_mac "$mgmt") mtu $OVN_MTU up
    ip addr add $mgmt/24 dev ovn-k8s-mp0
    ip route add $POD_RANGE via $gw dev ovn-k8s-mp0
    ip route add $SVC_RANGE via $gw dev ovn-k8s-mp0
    # Egress as OVN-Kubernetes' local gateway mode has it: ovn_cluster_router
    # reroutes the node's pods' packets to the outside network to ovn-k8s-mp0
    # (lab-ovnkube's policies), and the node forwards them, masqueraded to
    # its own address.
    sysctl -qw net.ipv4.ip_forward=1
    iptables -w -t nat -C POSTROUTING -s $POD_RANGE ! -d $POD_RANGE ! -o ovn-k8s-mp0 -j MASQUERADE 2>/dev/null ||
      iptables -w -t nat -A POSTROUTING -s $POD_RANGE ! -d $POD_RANGE ! -o ovn-k8s-mp0 -j MASQUERADE"
  node_tnl_neigh "$i"
}

# ovn_cni_conf I: lab-cni's netconf in OVN mode. The node's own certificate
# reads the pod's annotation (the Node authorizer allows a node its pods).
ovn_cni_conf() {
  local i=$1 n
  n=$(node_name "$i")
  cat <<EOF
{"cniVersion": "0.4.0", "name": "tflab", "type": "lab-cni", "mode": "ovn", "bridge": "br-int",
 "routes": ["$POD_RANGE", "$SVC_RANGE", "$OVN_HAIRPIN_IP/32", "$UNDERLAY_NET"], "mtu": $OVN_MTU,
 "ovn": {"apiServer": "$APISERVER", "caFile": "$S/pki/ca.crt", "certFile": "$S/pki/$n.crt", "keyFile": "$S/pki/$n.key",
         "controllerLog": "$S/logs/lab-ovnkube.log"}}
EOF
}

# ovn_controller: lab-ovnkube on the host, from a copy in the state dir (so
# that a rebuild can be noticed and the running one restarted).
ovn_controller() {
  cp "$root/bin/lab/lab-ovnkube" "$S/lab-ovnkube"
  start lab-ovnkube - "$S/lab-ovnkube" -kubeconfig "$S/kubeconfig" \
    -nb "unix:$OVN_DIR/ovnnb_db.sock" -sb "unix:$OVN_DIR/ovnsb_db.sock" -outside "$UNDERLAY_NET"
}

# ovn_annotate_nodes: each Node's subnet, once it is registered, where
# OVN-Kubernetes keeps it (k8s.ovn.org/node-subnets); lab-ovnkube reads it.
ovn_annotate_nodes() {
  local i n
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i")
    poll "$n to register" 60 kc get node "$n" || die "$n did not register: see $S/logs/$n-kubelet.log"
    kc annotate --overwrite node "$n" "k8s.ovn.org/node-subnets={\"default\":[\"$(node_cidr "$i")\"]}" >/dev/null
  done
}

# mgmt_ports_up: every node's management port is bound (NB `up`), which needs
# lab-ovnkube's topology and the node's ovn-controller both.
mgmt_ports_up() {
  local i
  for i in $(seq 1 "$NODES"); do
    [ "$(nbctl --bare --columns=up find Logical_Switch_Port name="k8s-$(node_name "$i")")" = true ] || return 1
  done
}
# ovn_ready: lab-up ends only when pods can start and kubelet probes reach
# them, and every chassis has caught up with the NB database.
ovn_ready() {
  poll "lab-ovnkube's topology and the chassis' management ports" 30 mgmt_ports_up ||
    die "management ports not up: see $S/logs/lab-ovnkube.log and $S/logs/*-ovn-controller.ovs.log"
  nbctl --wait=hv --timeout=20 sync || die "the chassis did not catch up with the NB database"
}

# ovn_ovs: the nodes' Open vSwitch is the ovn-kubernetes fixture's 4.0, not
# Debian 12's 3.1.0, whose userspace conntrack aborts under OVN's load
# balancers (notes/LAB-FACTS.md). OVN stays Debian's 23.03: ovn-controller
# speaks OpenFlow and OVSDB to the newer OVS.
ovn_ovs() {
  local d
  d=$("$here/build-ovs-root.sh") || return 1
  PATH=$d/ovs-bin:$PATH
  OVS_SCHEMA=$d/root/usr/share/openvswitch/vswitch.ovsschema
}

# ---------------------------------------------------------------- hooks
mode_ovn_ovs() { ovn_ovs; }
mode_ovn_daemons() { echo ovn-nb-ovsdb ovn-sb-ovsdb ovn-northd lab-ovnkube; }
mode_ovn_node_daemons() { echo "$1-ovsdb-server $1-ovs-vswitchd $1-ovn-controller $1-tnl-neigh $1-containerd $1-kubelet"; }
mode_ovn_logs() { echo '*ovn*.log'; }
# Before the nodes: each node binds the database sockets into its /run/ovn.
mode_ovn_central() { ovn_central; }
mode_ovn_node_mounts() {
  [ -e /run/ovn ] || { echo /run/ovn >>"$S/host-dirs"; mkdir -p /run/ovn; }
  ovn_node_binds "$1"
}
mode_ovn_node_ovs() { ovn_node "$1"; }
mode_ovn_cni_conf() { ovn_cni_conf "$1" >"$S/nodes/$(node_name "$1")/root/etc/cni/net.d/10-tflab.conf"; }
mode_ovn_cluster() { ovn_controller; }
mode_ovn_joined() { ovn_annotate_nodes; }
mode_ovn_ready() { ovn_ready; }
# A rebuilt lab-ovnkube replaces the running one.
mode_ovn_refresh() {
  cmp -s "$root/bin/lab/lab-ovnkube" "$S/lab-ovnkube" && return
  log "restarting lab-ovnkube (its binary changed)"
  stop_component lab-ovnkube
  ovn_controller
}
