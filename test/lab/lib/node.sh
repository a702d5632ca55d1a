# shellcheck shell=bash
# One lab node: its namespaces, Open vSwitch, containerd, lab agent (lab mode)
# or ovn-controller (OVN mode, lib/ovn.sh) and kubelet.
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
    # The node IP lives on br-phy; eth0 must not answer ARP for it.
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
  [ "$CNI" = antrea ] && read -ra extra <<<"$(antrea_node_binds)"
  for b in "${extra[@]}"; do
    mkdir -p "$nd/root$b"
    local d=$b
    while [ ! -e "$d" ]; do echo "$d" >>"$S/host-dirs"; d=$(dirname "$d"); done
    mkdir -p "$b"
    binds="$binds mount --bind $nd/root$b $b;"
  done
  if [ "$CNI" = ovn ]; then
    [ -e /run/ovn ] || { echo /run/ovn >>"$S/host-dirs"; mkdir -p /run/ovn; }
    binds="$binds $(ovn_node_binds "$nd")"
  fi
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
  ovsdb-tool create "$nd/ovs/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  start "$n-ovsdb-server" "$n" ovsdb-server "$nd/ovs/conf.db" --remote=punix:/run/openvswitch/db.sock \
    --pidfile=/run/openvswitch/ovsdb-server.pid --log-file="$S/logs/$n-ovsdb-server.ovs.log"
  poll "$n ovsdb-server" 10 test -S "$nd/root/run/openvswitch/db.sock"
  in_node "$n" ovs-vsctl --no-wait init
  node_vswitchd "$i"
  in_node "$n" bash -ec "
    ovs-vsctl --timeout=10 -- add-br br-phy -- set Bridge br-phy datapath_type=netdev \
      other_config:hwaddr=$(ip_mac "$ip") -- add-port br-phy eth0
    ip addr add $ip/24 dev br-phy
    ip link set br-phy up
    [ $CNI = lab ] || exit 0
    ovs-vsctl --timeout=10 -- add-br br-int -- set Bridge br-int datapath_type=netdev fail_mode=secure \
        protocols=OpenFlow10,OpenFlow13,OpenFlow15 other_config:disable-in-band=true \
      -- add-port br-int antrea-tun0 -- set Interface antrea-tun0 type=geneve \
        options:remote_ip=flow options:key=flow ofport_request=1 \
      -- add-port br-int antrea-gw0 -- set Interface antrea-gw0 type=internal ofport_request=2 \
        mac=\\\"$(ip_mac "10.244.$i.1")\\\"
    # The node's own way to its pods (kubelet probes) and, through the
    # tunnel, to the other nodes' pods and to ClusterIPs.
    ip link set antrea-gw0 mtu 1450 up
    ip addr add 10.244.$i.1/24 dev antrea-gw0
    ip route add $POD_RANGE dev antrea-gw0
    ip route add $SVC_RANGE dev antrea-gw0
    # add-port exits 0 even when the port failed: check its OpenFlow number.
    for p in eth0 antrea-tun0 antrea-gw0; do
      [ \"\$(ovs-vsctl get Interface \$p ofport)\" -gt 0 ] || { echo \"OVS port \$p failed\" >&2; exit 1; }
    done"
  case $CNI in
    ovn) ovn_node "$i" ;;
    antrea) antrea_node_ovs "$i"; node_tnl_neigh "$i" ;;
  esac
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

# node_vswitchd_restarted I (lab mode): a new ovs-vswitchd made the
# bridges' internal ports (br-phy, antrea-gw0) afresh, without their
# addresses and routes, and with no flows: put back what node_ovs set, and
# restart the lab agent, which installs its pipeline when it starts.
node_vswitchd_restarted() {
  local i=$1 n ip
  n=$(node_name "$i") ip=$(node_ip "$i")
  poll "$n's bridge ports" 10 in_node "$n" bash -ec "
    for p in eth0 antrea-tun0 antrea-gw0; do [ \"\$(ovs-vsctl --timeout=5 get Interface \$p ofport)\" -gt 0 ]; done
    ip link show br-phy && ip link show antrea-gw0"
  in_node "$n" bash -ec "
    ip addr replace $ip/24 dev br-phy
    ip link set br-phy up
    ip link set antrea-gw0 mtu 1450 up
    ip addr replace 10.244.$i.1/24 dev antrea-gw0
    ip route replace $POD_RANGE dev antrea-gw0
    ip route replace $SVC_RANGE dev antrea-gw0"
  stop_component "$n-lab-agent"
  node_agent "$i"
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
      while [ $# -ge 2 ]; do ovs-appctl tnl/neigh/set br-phy "$1" "$2" >/dev/null; shift 2; done
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
  if [ "$CNI" = ovn ]; then
    ovn_cni_conf "$i" >"$nd/root/etc/cni/net.d/10-tflab.conf"
  elif [ "$CNI" = antrea ]; then
    antrea_cni_conf >"$nd/root/etc/cni/net.d/10-antrea.conflist"
  else
    cat >"$nd/root/etc/cni/net.d/10-tflab.conf" <<EOF
{"cniVersion": "0.4.0", "name": "tflab", "type": "lab-cni", "bridge": "br-int",
 "subnet": "$(node_cidr "$i")", "gateway": "10.244.$i.1", "routes": ["$POD_RANGE", "$SVC_RANGE", "169.254.0.253/32"],
 "mtu": 1450, "agentSocket": "$nd/agent.sock", "dataDir": "/var/lib/cni/tflab"}
EOF
  fi
  start "$n-containerd" "$n" containerd --config "$nd/containerd.toml"
  poll "$n containerd" 20 ctr --address "$nd/root/run/containerd/containerd.sock" version
}

node_agent() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  cp "$root/bin/lab/lab-agent" "$nd/lab-agent"
  start "$n-lab-agent" "$n" "$nd/lab-agent" -kubeconfig "$S/kubeconfig" -node "$n" -socket "$nd/agent.sock" \
    -state-dir "$nd" -pod-cidr "$(node_cidr "$i")" -pod-range "$POD_RANGE" -gateway-mac "$(ip_mac "10.244.$i.1")"
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
  if [ "$CNI" = lab ]; then node_agent "$i"; fi
  node_kubelet "$i"
}
