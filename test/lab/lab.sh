#!/usr/bin/env bash
# The lab: a real Kubernetes cluster in a box (see test/lab/README.md).
#
#   lab.sh up        start etcd, the control plane and $TFLAB_NODES nodes (idempotent)
#   lab.sh down      stop everything and undo every namespace, mount, cgroup,
#                    interface, sysctl and file the lab created (also after a crash)
#   lab.sh status    what is running (exit 0 when the whole lab is up)
#   lab.sh exec NODE CMD...   run CMD in a node's network, mount and UTS namespaces
#   lab.sh images    rebuild the images and import them into every running node
#
# Each node is a network namespace plus a mount and UTS namespace (made with
# unshare, entered with nsenter; `ip netns exec` would hide the cgroup tree)
# holding its own Open vSwitch (userspace datapath), containerd, kubelet and
# lab agent. Every process the lab starts joins the cgroup "tflab" (pids and
# freezer hierarchies) and every pod lands under the kubelets' cgroupRoot
# tflab/NODE, so teardown finds all of them there, even after a crash.
set -euo pipefail
shopt -s nullglob

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
S=${TFLAB_STATE:-/run/traceflow-lab}
NODES=${TFLAB_NODES:-2}
# A running lab keeps the node count it was started with.
if [ -z "${TFLAB_NODES:-}" ] && [ -s "$S/node-count" ]; then NODES=$(cat "$S/node-count"); fi
CG=tflab
HOSTBR=tflab0
HOST_IP=10.89.0.1
POD_RANGE=10.244.0.0/16
SVC_RANGE=10.96.0.0/16
ETCD_PORT=12379
APISERVER=https://$HOST_IP:6443
IMG_PREFIX=ghcr.io/kubectl-traceflow
PAUSE_IMG=$IMG_PREFIX/lab-pause:v1
WORKLOAD_IMG=$IMG_PREFIX/lab-workload:v1
HELPER_REPO=$IMG_PREFIX/traceflow-helper
# Mount points a node gets private copies of: the kubelet and containerd write
# to these fixed paths whatever their configuration says.
NODE_BINDS=(/run/containerd /var/lib/containerd /var/lib/kubelet /var/lib/cni /var/log/pods
  /var/log/containers /run/openvswitch /run/netns /etc/cni/net.d)
# Kernel settings the kubelet changes on the whole machine; down puts them back.
KUBELET_SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
  kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

log() { printf '[lab %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
node_name() { echo "tf-node-$1"; }
node_ip() { echo "10.89.0.$((10 + $1))"; }
node_cidr() { echo "10.244.$1.0/24"; }
# The MAC of a node's underlay bridge, derived from its IP (the agent seeds
# tunnel neighbours with the same rule).
ip_mac() { local IFS=.; set -- $1; printf '02:00:%02x:%02x:%02x:%02x' "$1" "$2" "$3" "$4"; }
in_node() { local n=$1; shift; nsenter --net=/run/netns/"$n" --mount="$S/ns/$n.mnt" --uts="$S/ns/$n.uts" -- "$@"; }
kc() { kubectl --kubeconfig "$S/kubeconfig" "$@"; }

# poll DESCRIPTION SECONDS CMD...: run CMD every 100 ms until it succeeds.
poll() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.1
  done
}

cgroup_hier() { for h in /sys/fs/cgroup/*/; do [ -f "$h/cgroup.procs" ] && echo "${h%/}"; done; }

# mkcg PATH: create a cgroup in every hierarchy (cpuset needs cpus and mems
# copied down before a process may join).
mkcg() {
  local h d p
  for h in $(cgroup_hier); do
    p=$h
    for d in ${1//\// }; do
      if [ ! -d "$p/$d" ]; then
        mkdir "$p/$d"
        if [ -f "$p/$d/cpuset.cpus" ]; then
          cat "$p/cpuset.cpus" >"$p/$d/cpuset.cpus"
          cat "$p/cpuset.mems" >"$p/$d/cpuset.mems"
        fi
      fi
      p=$p/$d
    done
  done
}

# start NAME NODE|- CMD...: start a daemon in the background as a member of
# the lab's cgroup, recording the daemon's own PID (exec all the way down).
start() {
  local name=$1 node=$2; shift 2
  if [ "$node" != - ]; then
    set -- nsenter --net=/run/netns/"$node" --mount="$S/ns/$node.mnt" --uts="$S/ns/$node.uts" -- "$@"
  fi
  setsid bash -c 'for c in /sys/fs/cgroup/pids/'$CG'/daemons /sys/fs/cgroup/freezer/'$CG'/daemons; do
      [ -d "$c" ] && echo $$ >"$c/cgroup.procs"; done; exec "$@"' _ "$@" \
    >"$S/logs/$name.log" 2>&1 </dev/null 8<&- &
  echo $! >"$S/pids/$name.pid"
}

alive() { local p; p=$(cat "$S/pids/$1.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }

components() {
  echo etcd kube-apiserver kube-controller-manager kube-scheduler
  local i n
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i")
    echo "$n-ovsdb-server $n-ovs-vswitchd $n-containerd $n-lab-agent $n-kubelet"
  done
}

# ---------------------------------------------------------------- build
build() {
  "$root/hack/install-deps.sh"
  # Beyond install-deps' list, the lab needs openssl (certificates) and kubectl.
  command -v openssl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssl >/dev/null
  command -v kubectl >/dev/null || die "kubectl not found: install kubectl (v1.32 or newer) on PATH"
  K8S_BIN=$("$here/build-k8s.sh")
  local version
  version=$(cd "$root" && git describe --tags --always --dirty 2>/dev/null || echo dev)
  HELPER_IMG=$HELPER_REPO:$version
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/lab/ ./test/lab/cmd/...)
  [ -x "$root/bin/traceflow-helper" ] || (cd "$root" && make -s build >/dev/null)
}

# images: one-layer OCI archives, no Docker involved.
images() {
  local b=$root/bin/lab out=$S/images
  mkdir -p "$out"
  # Not in parallel: a bare `wait` here would also wait for the daemons.
  "$b/lab-image" -ref "$PAUSE_IMG" -o "$out/pause.tar" -entrypoint /pause "$b/pause=/pause"
  "$b/lab-image" -ref "$WORKLOAD_IMG" -o "$out/workload.tar" -entrypoint /workload "$b/workload=/workload"
  "$b/lab-image" -ref "$HELPER_IMG,$HELPER_REPO:latest" -o "$out/helper.tar" -entrypoint /traceflow-helper \
    "$root/bin/traceflow-helper=/traceflow-helper" "$root/bin/traceflow-helper=/usr/local/bin/traceflow-helper"
  echo "$HELPER_IMG" >"$S/helper-image"
}

import_images() {
  local n=$1 img
  for img in "$S"/images/*.tar; do
    ctr --address "$S/nodes/$n/root/run/containerd/containerd.sock" -n k8s.io image import \
      --snapshotter native "$img" >/dev/null
  done
}

# ---------------------------------------------------------------- certificates
cert() { # NAME SUBJECT [SAN]
  local k=$S/pki/$1
  local ext="basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth"
  [ -n "${3:-}" ] && ext="$ext\nsubjectAltName=$3"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$k.key" -subj "$2" 2>/dev/null |
    openssl x509 -req -CA "$S/pki/ca.crt" -CAkey "$S/pki/ca.key" -set_serial "0x$(openssl rand -hex 8)" -days 30 \
      -extfile <(printf "$ext") -out "$k.crt" 2>/dev/null
  [ -s "$k.crt" ] || die "could not make certificate $1"
}

kubeconfig() { # FILE CERTNAME
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tflab
  cluster: {server: "$APISERVER", certificate-authority: "$S/pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$S/pki/$2.crt", client-key: "$S/pki/$2.key"}
contexts:
- name: tflab
  context: {cluster: tflab, user: $2}
current-context: tflab
EOF
}

pki() {
  mkdir -p "$S/pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=tflab-ca \
    -keyout "$S/pki/ca.key" -out "$S/pki/ca.crt" 2>/dev/null
  cert apiserver /CN=kube-apiserver \
    "IP:$HOST_IP,IP:127.0.0.1,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost" &
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" &
  cert admin "/O=system:masters/CN=tflab-admin" &
  cert controller-manager /CN=system:kube-controller-manager &
  cert scheduler /CN=system:kube-scheduler &
  local i
  for i in $(seq 1 "$NODES"); do cert "$(node_name "$i")" "/O=system:nodes/CN=system:node:$(node_name "$i")" & done
  openssl ecparam -name prime256v1 -genkey -noout -out "$S/pki/sa.key" 2>/dev/null
  openssl ec -in "$S/pki/sa.key" -pubout -out "$S/pki/sa.pub" 2>/dev/null
  wait
  for f in "$S"/pki/*.key; do [ -s "${f%.key}.crt" ] || [ "${f##*/}" = sa.key ] || die "certificate for $f missing"; done
  kubeconfig "$S/kubeconfig" admin
  kubeconfig "$S/controller-manager.kubeconfig" controller-manager
  kubeconfig "$S/scheduler.kubeconfig" scheduler
  for i in $(seq 1 "$NODES"); do kubeconfig "$S/nodes/$(node_name "$i")/kubelet.kubeconfig" "$(node_name "$i")"; done
}

# ---------------------------------------------------------------- control plane
control_plane() {
  start etcd - etcd --name tflab --data-dir "$S/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster tflab=http://127.0.0.1:12380
  start kube-apiserver - "$K8S_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$HOST_IP" --advertise-address="$HOST_IP" --secure-port=6443 \
    --tls-cert-file="$S/pki/apiserver.crt" --tls-private-key-file="$S/pki/apiserver.key" \
    --client-ca-file="$S/pki/ca.crt" \
    --kubelet-client-certificate="$S/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$S/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-key-file="$S/pki/sa.pub" --service-account-signing-key-file="$S/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range="$SVC_RANGE" \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --enable-priority-and-fairness=false --profiling=false
}

controllers() {
  start kube-controller-manager - "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$S/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$S/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$S/controller-manager.kubeconfig" \
    --service-account-private-key-file="$S/pki/sa.key" --root-ca-file="$S/pki/ca.crt" \
    --use-service-account-credentials=true --cluster-name=tflab --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --profiling=false
  start kube-scheduler - "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$S/scheduler.kubeconfig" \
    --authentication-kubeconfig="$S/scheduler.kubeconfig" \
    --authorization-kubeconfig="$S/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --profiling=false
}

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
  start "$n-ovs-vswitchd" "$n" ovs-vswitchd unix:/run/openvswitch/db.sock \
    --pidfile=/run/openvswitch/ovs-vswitchd.pid --log-file="$S/logs/$n-ovs-vswitchd.ovs.log"
  poll "$n ovs-vswitchd" 10 test -e "$nd/root/run/openvswitch/ovs-vswitchd.pid"
  in_node "$n" bash -ec "
    ovs-vsctl --timeout=10 -- add-br br-phy -- set Bridge br-phy datapath_type=netdev \
      other_config:hwaddr=$(ip_mac "$ip") -- add-port br-phy eth0
    ip addr add $ip/24 dev br-phy
    ip link set br-phy up
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
  cat >"$nd/root/etc/cni/net.d/10-tflab.conf" <<EOF
{"cniVersion": "0.4.0", "name": "tflab", "type": "lab-cni", "bridge": "br-int",
 "subnet": "$(node_cidr "$i")", "gateway": "10.244.$i.1", "routes": ["$POD_RANGE", "$SVC_RANGE"],
 "mtu": 1450, "agentSocket": "$nd/agent.sock", "dataDir": "/var/lib/cni/tflab"}
EOF
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
  node_agent "$i"
  node_kubelet "$i"
}

nodes_ready() {
  local ready
  ready=$(kc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True)
  [ "$ready" -ge "$NODES" ]
}

healthy() {
  local c
  for c in $(components); do alive "$c" || return 1; done
  kc get --raw /readyz >/dev/null 2>&1 && nodes_ready
}

up() {
  [ "$(id -u)" -eq 0 ] || die "the lab needs root (namespaces, OVS, kubelet)"
  local t0=$SECONDS
  build
  if [ -d "$S" ] && healthy; then
    log "lab already up; refreshing images and lab binaries"
    images
    for i in $(seq 1 "$NODES"); do import_images "$(node_name "$i")"; done
    cp "$root/bin/lab/lab-cni" "$S/cni-bin/.lab-cni" && mv "$S/cni-bin/.lab-cni" "$S/cni-bin/lab-cni"
    for i in $(seq 1 "$NODES"); do
      n=$(node_name "$i")
      if ! cmp -s "$root/bin/lab/lab-agent" "$S/nodes/$n/lab-agent"; then
        log "restarting $n's lab agent (its binary changed)"
        kill "$(cat "$S/pids/$n-lab-agent.pid")"
        poll "$n-lab-agent to stop" 10 bash -c "! kill -0 $(cat "$S/pids/$n-lab-agent.pid")"
        node_agent "$i"
      fi
    done
    echo "export KUBECONFIG=$S/kubeconfig"
    return
  fi
  if [ -e "$S" ] || ip link show "$HOSTBR" >/dev/null 2>&1; then
    log "removing what is left of an earlier lab"
    down
  fi
  mkdir -p "$S"/{pids,logs,ns,images,cni-bin}
  echo "$NODES" >"$S/node-count"
  for i in $(seq 1 "$NODES"); do mkdir -p "$S/nodes/$(node_name "$i")"; done
  # unshare --mount=FILE needs FILE on a private mount.
  mount --bind "$S/ns" "$S/ns"
  mount --make-private "$S/ns"
  mkcg "$CG/daemons"
  for i in $(seq 1 "$NODES"); do mkcg "$CG/$(node_name "$i")"; done
  local s
  for s in "${KUBELET_SYSCTLS[@]}"; do echo "$s $(cat /proc/sys/$s)"; done >"$S/sysctls"
  cp "$root/bin/lab/lab-cni" /usr/lib/cni/loopback "$S/cni-bin/"

  ip link add "$HOSTBR" type bridge
  ip addr add "$HOST_IP/24" dev "$HOSTBR"
  ethtool -K "$HOSTBR" tx off >/dev/null
  ip link set "$HOSTBR" up

  pki
  control_plane
  images
  local pids=()
  for i in $(seq 1 "$NODES"); do
    node_up "$i" >"$S/logs/node-up-$i.log" 2>&1 &
    pids+=($!)
  done
  poll kube-apiserver 60 kc get --raw /readyz || die "kube-apiserver not ready: see $S/logs/kube-apiserver.log"
  controllers
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "$S/logs/node-up-$((i + 1)).log" >&2; die "node $((i + 1)) failed to start"; }
  done
  poll "$NODES Ready nodes" 60 nodes_ready || die "nodes not Ready: see $S/logs/*-kubelet.log"
  # Pods are refused until the controller-manager has made this account.
  poll "the default service account" 30 kc get serviceaccount default -n default ||
    die "no default service account: see $S/logs/kube-controller-manager.log"
  log "lab up in $((SECONDS - t0))s: $NODES nodes Ready"
  kc get nodes -o wide >&2
  echo "export KUBECONFIG=$S/kubeconfig"
}

# ---------------------------------------------------------------- teardown
lab_pids() {
  local f p
  for f in /sys/fs/cgroup/pids/$CG /sys/fs/cgroup/freezer/$CG; do
    [ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  # Strays outside the cgroup: anything in a node's network namespace.
  local ino=() n
  for n in /run/netns/tf-node-*; do ino+=("$(stat -Lc %i "$n" 2>/dev/null)"); done
  if [ ${#ino[@]} -gt 0 ]; then
    for p in /proc/[0-9]*; do
      n=$(stat -Lc %i "$p/ns/net" 2>/dev/null) || continue
      for i in "${ino[@]}"; do [ "$n" = "$i" ] && echo "${p#/proc/}"; done
    done
  fi
}

down() {
  [ "$(id -u)" -eq 0 ] || die "the lab needs root"
  local t0=$SECONDS end=$((SECONDS + 20)) pids
  # Freeze first so that nothing forks while being killed.
  [ -d /sys/fs/cgroup/freezer/$CG ] && echo FROZEN >/sys/fs/cgroup/freezer/$CG/freezer.state 2>/dev/null || true
  while pids=$(lab_pids | sort -u | grep -v "^$$\$" || true); [ -n "$pids" ]; do
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    [ -d /sys/fs/cgroup/freezer/$CG ] && echo THAWED >/sys/fs/cgroup/freezer/$CG/freezer.state 2>/dev/null || true
    [ $SECONDS -lt $end ] || { log "processes still alive: $pids"; break; }
    sleep 0.1
  done
  # Killed processes linger as zombies until reaped; wait for them to go.
  poll "killed lab processes to be reaped" 10 bash -c "! grep -qs ':/$CG/' /proc/[0-9]*/cgroup" || true
  local f
  for f in "$S"/ns/*.mnt "$S"/ns/*.uts; do umount -l "$f" 2>/dev/null || true; done
  mountpoint -q "$S/ns" 2>/dev/null && umount -l "$S/ns"
  for f in /run/netns/tf-node-*; do ip netns del "$(basename "$f")" 2>/dev/null || true; done
  for f in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^(tfv[0-9]+|$HOSTBR)\$"); do
    ip link del "$f" 2>/dev/null || true
  done
  # Cgroups bottom-up; a dying process may hold one for a moment.
  local h d
  for h in $(cgroup_hier); do
    [ -d "$h/$CG" ] || continue
    while [ -d "$h/$CG" ]; do
      find "$h/$CG" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$h/$CG" ] || break
      [ $SECONDS -lt $end ] || { log "cgroup $h/$CG still busy"; break; }
      sleep 0.1
    done
  done
  if [ -f "$S/sysctls" ]; then
    while read -r s v; do echo "$v" >"/proc/sys/$s" 2>/dev/null || true; done <"$S/sysctls"
  fi
  if [ -f "$S/host-dirs" ]; then
    while read -r d; do rmdir "$d" 2>/dev/null || true; done < <(sort -ru "$S/host-dirs")
  fi
  rm -rf "$S"
  log "lab down in $((SECONDS - t0))s"
}

status() {
  if [ ! -d "$S" ]; then echo "lab: down"; return 3; fi
  local c ok=0
  for c in $(components); do
    if alive "$c"; then printf '  %-34s running (pid %s)\n' "$c" "$(cat "$S/pids/$c.pid")"
    else printf '  %-34s NOT RUNNING\n' "$c"; ok=1; fi
  done
  if kc get --raw /readyz >/dev/null 2>&1; then kc get nodes -o wide; else echo "  apiserver not ready"; ok=1; fi
  if [ $ok -eq 0 ] && nodes_ready; then
    echo "lab: up; export KUBECONFIG=$S/kubeconfig"
  else
    echo "lab: partly up (make lab-down, then make lab-up)"; return 1
  fi
}

# One up or down at a time (the e2e harness and a developer may race). The
# lock is on this script itself, so it leaves no file behind.
lock() { exec 8<"$0"; flock 8; }

case "${1:-}" in
  up) lock; up ;;
  down) lock; down ;;
  status) status ;;
  exec) shift; n=$1; shift; in_node "$n" "$@" ;;
  images)
    lock; build; images
    for i in $(seq 1 "$NODES"); do import_images "$(node_name "$i")"; done ;;
  *) echo "usage: $0 up|down|status|exec NODE CMD...|images" >&2; exit 2 ;;
esac
