# shellcheck shell=bash
# One lab node: its namespaces, Open vSwitch, containerd and kubelet, and
# what its mode (modes/*.sh) adds to them.
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here.

# ---------------------------------------------------------------- nodes
# node_ns I: the node's network namespace on the underlay, and its mount and
# UTS namespaces with private copies of the paths in NODE_BINDS.
node_ns() {
  local i=$1 n nd ip
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i") ip=$(node_ip "$i")
  ip netns add "$n"
  ip link add "tfv$i" mtu 1500 type veth peer name eth0 netns "$n"
  ethtool -K "tfv$i" tx off >/dev/null
  ip link set "tfv$i" master "$HOSTBR" up
  nsenter --net=/run/netns/"$n" bash -ec "
    ip link set lo up
    ethtool -K eth0 tx off >/dev/null
    ip link set eth0 up
    # The node IP lives on the underlay bridge; eth0 must not answer ARP for it.
    sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0"
  touch "$S/ns/$n.mnt" "$S/ns/$n.uts"
  local binds="" b
  for b in "${NODE_BINDS[@]}"; do
    mkdir -p "$nd/root$b"
    # Record every directory made on the host (parents too) for down.
    local d=$b
    while [ ! -e "$d" ]; do echo "$d" >>"$S/host-dirs"; d=$(dirname "$d"); done
    mkdir -p "$b"
    binds="$binds mount --bind $nd/root$b $b;"
  done
  local extra=()
  read -ra extra <<<"$(mode_hook node_binds)"
  for b in "${extra[@]}"; do
    mkdir -p "$nd/root$b"
    local d=$b
    while [ ! -e "$d" ]; do echo "$d" >>"$S/host-dirs"; d=$(dirname "$d"); done
    mkdir -p "$b"
    binds="$binds mount --bind $nd/root$b $b;"
  done
  if mode_has node_mounts; then binds="$binds $(mode_hook node_mounts "$nd")"; fi
  nsenter --net=/run/netns/"$n" unshare --mount="$S/ns/$n.mnt" --uts="$S/ns/$n.uts" --propagation private \
    bash -ec "
      hostname $n
      mkdir -p $nd/cgroup
      # sysfs must show the node's interfaces (kubelet and OVS read it), but a
      # fresh sysfs has no cgroup tree: carry the host's over.
      mount --rbind /sys/fs/cgroup $nd/cgroup
      mount -t sysfs sysfs /sys
      mount --move $nd/cgroup /sys/fs/cgroup
      $binds"
}

node_ovs() {
  local i=$1 n nd ip
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i") ip=$(node_ip "$i")
  mkdir -p "$nd/ovs"
  ovsdb-tool create "$nd/ovs/conf.db" "$OVS_SCHEMA"
  start "$n-ovsdb-server" "$n" ovsdb-server "$nd/ovs/conf.db" --remote=punix:/run/openvswitch/db.sock \
    --pidfile=/run/openvswitch/ovsdb-server.pid --log-file="$S/logs/$n-ovsdb-server.ovs.log"
  poll "$n ovsdb-server" 10 ovsdb_listening "$nd/root/run/openvswitch/db.sock"
  in_node "$n" ovs-vsctl --no-wait init
  mode_hook node_ovsdb "$i"
  node_vswitchd "$i"
  in_node "$n" bash -ec "
    ovs-vsctl --timeout=10 -- add-br $PHY_BR -- set Bridge $PHY_BR datapath_type=netdev \
      other_config:hwaddr=$(ip_mac "$ip") -- add-port $PHY_BR eth0
    ip addr add $ip/24 dev $PHY_BR
    ip link set $PHY_BR up"
  mode_hook node_ovs "$i"
}

# node_vswitchd I: start the node's ovs-vswitchd (also how `lab.sh restart`
# starts it again).
node_vswitchd() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  start "$n-ovs-vswitchd" "$n" ovs-vswitchd unix:/run/openvswitch/db.sock \
    --pidfile=/run/openvswitch/ovs-vswitchd.pid --log-file="$S/logs/$n-ovs-vswitchd.ovs.log"
  poll "$n ovs-vswitchd" 10 test -e "$nd/root/run/openvswitch/ovs-vswitchd.pid"
}

# node_tnl_neigh I: userspace Geneve drops the first packet to a peer while it
# resolves the peer's MAC; the MAC is known (ip_mac), so seed it, and keep
# seeding: entries age out. (In lab mode the lab agent does this itself.)
node_tnl_neigh() {
  local i=$1 j n peers=""
  n=$(node_name "$i")
  for j in $(seq 1 "$NODES"); do
    [ "$j" = "$i" ] || peers="$peers $(node_ip "$j") $(ip_mac "$(node_ip "$j")")"
  done
  # shellcheck disable=SC2016 # expanded by the loop's own shell
  start "$n-tnl-neigh" "$n" bash -c 'while :; do set -- '"$peers"'
      while [ $# -ge 2 ]; do ovs-appctl tnl/neigh/set '"$PHY_BR"' "$1" "$2" >/dev/null; shift 2; done
      sleep 60; done'
}

node_containerd() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  cat >"$nd/containerd.toml" <<EOF
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "/run/containerd/containerd.sock"
# Without this containerd writes /opt/containerd on the host.
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMG"
  # runc cannot lower oom_score_adj here (no CAP_SYS_RESOURCE).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$S/cni-bin"
    conf_dir = "/etc/cni/net.d"
EOF
  mode_hook cni_conf "$i"
  start "$n-containerd" "$n" containerd --config "$nd/containerd.toml"
  poll "$n containerd" 20 ctr --address "$nd/root/run/containerd/containerd.sock" version
}

node_kubelet() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  cat >"$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1; kubelet 1.35 refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
# Two kubelets share one cgroup tree: each gets its own root.
cgroupRoot: /$CG/$n
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: $(node_ip "$i")
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$S/pki/ca.crt"}
authorization: {mode: Webhook}
evictionHard: {memory.available: "1%", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
resolvConf: ""
nodeStatusUpdateFrequency: 4s
EOF
  start "$n-kubelet" "$n" "$K8S_BIN/kubelet" --config="$nd/kubelet.yaml" --kubeconfig="$nd/kubelet.kubeconfig" \
    --hostname-override="$n" --node-ip="$(node_ip "$i")" --v=1
}

node_up() {
  local i=$1
  node_ns "$i"
  node_ovs "$i"
  node_containerd "$i"
  import_images "$(node_name "$i")"
  mode_hook node_up "$i"
  node_kubelet "$i"
}
