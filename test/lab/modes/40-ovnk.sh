# shellcheck shell=bash
# The genuine OVN-Kubernetes (TFLAB_CNI=ovnk), built from the fixtures' source
# (build-ovnk.sh) and run as its interconnect mode runs it: the cluster
# manager on the host; on every node its own zone, with OVN 26.03's NB and SB
# databases, ovn-northd and ovn-controller, ovnkube (controller and node in
# one process) and the real CNI shim ovn-k8s-cni-overlay, which the kubelet's
# containerd calls. The nodes run the fixture's OVS 4.0 and OVN 26.03 from a
# private root (build-ovs-root.sh), and their underlay bridge is breth0, the
# gateway bridge ovnkube takes over (shared gateway mode).
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here;
# the hooks it calls (mode_ovnk_*, described in 10-lab.sh) are at the end.

# Geneve with OVN-Kubernetes' options: 58 bytes of overhead.
OVNK_MTU=1400

# ovnk_ovs: OVS 4.0 and OVN 26.03 from the fixture's root, first on PATH for
# every lab.sh command (exec reaches the node's own ovn-nbctl). ovnkube finds
# breth0 by that name.
ovnk_ovs() {
  local d
  d=$("$here/build-ovs-root.sh") || return 1
  PATH=$d/ovn-bin:$d/ovs-bin:$PATH
  OVS_SCHEMA=$d/root/usr/share/openvswitch/vswitch.ovsschema
  OVNK_SCHEMAS=$d/root/usr/share/ovn
  PHY_BR=breth0
}

# ovnk_build: ovnkube and the CNI shim, cached by the source's sum.
ovnk_build() {
  OVNK_BIN=$("$here/build-ovnk.sh") || die "building OVN-Kubernetes (above)"
}

# ovnk_ovsdb I: before ovs-vswitchd starts. The CNI leaves the veths' TX
# checksum offload on; the userspace datapath then drops TCP unless it does
# TSO itself (measured in the fixture's recipe).
ovnk_ovsdb() {
  local i=$1 n ip
  n=$(node_name "$i") ip=$(node_ip "$i")
  in_node "$n" ovs-vsctl --no-wait set Open_vSwitch . other_config:userspace-tso-enable=true \
    external_ids:system-id="$n" external_ids:hostname="$n" \
    external_ids:ovn-bridge-datapath-type=netdev external_ids:ovn-encap-type=geneve \
    external_ids:ovn-encap-ip="$ip" external_ids:ovn-remote=unix:/run/ovn/ovnsb_db.sock \
    external_ids:ovn-bridge=br-int
}

# ovnk_node I: the node's zone: NB, SB, ovn-northd and ovn-controller, all in
# the node's private /run/ovn. breth0 (made by node_ovs) is marked as the
# gateway bridge with eth0 its uplink.
ovnk_node() {
  local i=$1 n nd db
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  in_node "$n" ovs-vsctl --timeout=10 set Bridge breth0 external_ids:bridge-id=breth0 external_ids:bridge-uplink=eth0
  mkdir -p "$nd/ovn"
  for db in nb sb; do
    ovsdb-tool create "$nd/ovn/ovn${db}_db.db" "$OVNK_SCHEMAS/ovn-$db.ovsschema"
    start "$n-ovn-$db-ovsdb" "$n" ovsdb-server "$nd/ovn/ovn${db}_db.db" --remote=punix:/run/ovn/ovn${db}_db.sock \
      --pidfile=/run/ovn/ovn${db}_db.pid --unixctl=/run/ovn/ovn${db}_db.ctl --log-file="$S/logs/$n-ovn-$db-ovsdb.ovs.log"
  done
  poll "$n's OVN databases" 10 ovsdb_listening "$nd/root/run/ovn/ovnnb_db.sock" "$nd/root/run/ovn/ovnsb_db.sock" ||
    die "no OVN databases on $n: see $S/logs/$n-ovn-*-ovsdb.ovs.log"
  in_node "$n" ovn-nbctl --db=unix:/run/ovn/ovnnb_db.sock init
  in_node "$n" ovn-sbctl --db=unix:/run/ovn/ovnsb_db.sock init
  start "$n-ovn-northd" "$n" ovn-northd --ovnnb-db=unix:/run/ovn/ovnnb_db.sock --ovnsb-db=unix:/run/ovn/ovnsb_db.sock \
    --pidfile=/run/ovn/ovn-northd.pid --log-file="$S/logs/$n-ovn-northd.ovs.log"
  start "$n-ovn-controller" "$n" ovn-controller unix:/run/openvswitch/db.sock \
    --pidfile=/run/ovn/ovn-controller.pid --log-file="$S/logs/$n-ovn-controller.ovs.log"
  node_tnl_neigh "$i"
}

# ovnk_flags: what the cluster manager and every ovnkube share. ovnkube on a
# node authenticates with a service account's token, which it also hands the
# CNI shim (through the CNI configuration it writes): not with a client
# certificate.
ovnk_flags() {
  echo --k8s-apiserver "$APISERVER" --k8s-cacert "$S/pki/ca.crt" --k8s-token "$(cat "$S/ovnk-token")" --cluster-subnets "$POD_RANGE/24" --k8s-service-cidrs "$SVC_RANGE" \
    --gateway-mode shared --enable-admin-network-policy --enable-egress-firewall --enable-multicast \
    --host-network-namespace ovn-host-network --loglevel 4
}

# ovnk_cluster: the CRDs ovnkube watches (its own and the network-policy-api's,
# from the module proxy), its namespaces, and the cluster manager on the host.
ovnk_cluster() {
  local npapi
  kc apply -f "$OVNK_BIN/crds/" >/dev/null
  npapi=$(cd / && go mod download -json sigs.k8s.io/network-policy-api@v0.1.5 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$npapi" ] || die "sigs.k8s.io/network-policy-api@v0.1.5 not downloaded"
  kc apply -f "$npapi/config/crd/experimental/policy.networking.k8s.io_adminnetworkpolicies.yaml" \
    -f "$npapi/config/crd/experimental/policy.networking.k8s.io_baselineadminnetworkpolicies.yaml" >/dev/null
  kc create namespace ovn-kubernetes >/dev/null 2>&1 || true
  kc create namespace ovn-host-network >/dev/null 2>&1 || true
  kc create serviceaccount ovnkube -n ovn-kubernetes >/dev/null 2>&1 || true
  kc create clusterrolebinding ovnkube --clusterrole=cluster-admin --serviceaccount=ovn-kubernetes:ovnkube >/dev/null 2>&1 || true
  kc create token ovnkube -n ovn-kubernetes --duration=720h >"$S/ovnk-token"
  # shellcheck disable=SC2046 # ovnk_flags is a list of words
  start ovnk-cluster-manager - "$OVNK_BIN/ovnkube" --init-cluster-manager ovnk-cluster-manager $(ovnk_flags) \
    --logfile "$S/logs/ovnk-cluster-manager.log"
}

# ovnk_ovnkube: ovnkube on every node, once the node is registered (it reads
# its Node). It writes the CNI configuration when the node is ready.
ovnk_ovnkube() {
  local i n ip
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i") ip=$(node_ip "$i")
    poll "$n to register" 60 kc get node "$n" || die "$n did not register: see $S/logs/$n-kubelet.log"
    # shellcheck disable=SC2046 # ovnk_flags is a list of words
    start "$n-ovnkube" "$n" "$OVNK_BIN/ovnkube" --init-ovnkube-controller "$n" --init-node "$n" $(ovnk_flags) \
      --gateway-interface breth0 --gateway-nexthop "$HOST_IP" --nodeport --mtu "$OVNK_MTU" --encap-ip "$ip" \
      --cni-conf-dir /run/ovn-kubernetes/cni-conf --cnilogfile "$S/logs/$n-ovn-cni.log" \
      --logfile "$S/logs/$n-ovnkube.log" --pidfile /run/ovn-kubernetes/ovnkube.pid
  done
}

# ovnk_cni_conf: ovnkube writes its CNI configuration once its node is ready,
# with cniVersion 1.1.0, which Debian 12's containerd (1.6, libcni 1.1) refuses
# ("unsupported CNI result version"). The shim answers in the version the
# configuration asks for: each node gets ovnkube's configuration as 1.0.0,
# and only once ovnkube wrote it, so that the node turns Ready when its
# dataplane is.
ovnk_cni_conf() {
  local i n nd
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
    poll "$n's ovnkube to write its CNI configuration" 60 test -s "$nd/root/run/ovn-kubernetes/cni-conf/10-ovn-kubernetes.conf" ||
      die "ovnkube on $n wrote no CNI configuration: see $S/logs/$n-ovnkube.log"
    sed 's/"cniVersion":"1\.1\.0"/"cniVersion":"1.0.0"/' "$nd/root/run/ovn-kubernetes/cni-conf/10-ovn-kubernetes.conf" \
      >"$nd/root/etc/cni/net.d/10-ovn-kubernetes.conf"
    grep -q '"cniVersion":"1.0.0"' "$nd/root/etc/cni/net.d/10-ovn-kubernetes.conf" ||
      die "ovnkube's CNI configuration on $n is not 1.1.0 any more: $(cat "$nd/root/etc/cni/net.d/10-ovn-kubernetes.conf")"
  done
}

# ---------------------------------------------------------------- hooks
mode_ovnk_ovs() { ovnk_ovs; }
mode_ovnk_build() { ovnk_build; }
mode_ovnk_daemons() { echo ovnk-cluster-manager; }
mode_ovnk_node_daemons() {
  echo "$1-ovsdb-server $1-ovs-vswitchd $1-ovn-nb-ovsdb $1-ovn-sb-ovsdb $1-ovn-northd $1-ovn-controller $1-tnl-neigh $1-containerd $1-kubelet $1-ovnkube"
}
mode_ovnk_logs() { echo '*ovnk-cluster-manager.log *ovnkube.log *ovn-cni.log *ovn-northd.ovs.log *ovn-controller.ovs.log'; }
# up runs the build hook (ovnk_build, which sets OVNK_BIN) before this one.
mode_ovnk_cni_bins() { cp "$OVNK_BIN/ovn-k8s-cni-overlay" "$S/cni-bin/"; }
mode_ovnk_node_binds() { echo /run/ovn /run/ovn-kubernetes; }
mode_ovnk_node_ovsdb() { ovnk_ovsdb "$1"; }
mode_ovnk_node_ovs() { ovnk_node "$1"; }
mode_ovnk_node_up() { in_node "$(node_name "$1")" sysctl -qw net.ipv4.ip_forward=1; }
mode_ovnk_cluster() { ovnk_cluster; }
mode_ovnk_joined() {
  ovnk_ovnkube
  ovnk_cni_conf
}
