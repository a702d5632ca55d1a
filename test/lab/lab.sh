#!/usr/bin/env bash
# The lab: a real Kubernetes cluster in a box (see test/lab/README.md).
#
#   lab.sh up        start etcd, the control plane and $TFLAB_NODES nodes with the
#                    dataplane $TFLAB_CNI (idempotent; another CNI than the running
#                    one takes the lab down and up again)
#   lab.sh down      stop everything and undo every namespace, mount, cgroup,
#                    interface, sysctl and file the lab created, in either mode
#                    (also after a crash); the logs are kept in
#                    $TFLAB_LOGKEEP/MODE (default /var/log/traceflow-lab/MODE)
#   lab.sh errors [MODE]   the last error lines of the dataplane's logs (the running
#                    lab's, else the kept ones)
#   lab.sh status    what is running and which CNI (exit 0 when the whole lab is up)
#   lab.sh exec NODE CMD...   run CMD in a node's network, mount and UTS namespaces
#   lab.sh images    rebuild the images and import them into every running node
#   lab.sh restart DAEMON   stop kube-apiserver or tf-node-N-ovs-vswitchd (lab mode) and
#                    start it again as up did (idempotent; the fault tests use it)
#
# Each node is a network namespace plus a mount and UTS namespace (made with
# unshare, entered with nsenter; `ip netns exec` would hide the cgroup tree)
# holding its own Open vSwitch (userspace datapath), containerd and kubelet,
# and the dataplane TFLAB_CNI names:
#   lab  the lab CNI and the lab agent, which programs an Antrea-like pipeline
#        (the default);
#   ovn  real OVN as OVN-Kubernetes shapes it (lib/ovn.sh): ovsdb-servers,
#        ovn-northd and lab-ovnkube on the host, ovn-controller per node, and
#        the lab CNI in its OVN mode;
#   antrea  the real Antrea v2.3.2 (lib/antrea.sh), built from the fixtures'
#        source: antrea-controller on the host, antrea-agent per node, and
#        antrea-cni as the nodes' CNI.
# Every process the lab starts joins the cgroup "tflab" (pids and
# freezer hierarchies) and every pod lands under the kubelets' cgroupRoot
# tflab/NODE, so teardown finds all of them there, even after a crash.
set -euo pipefail
shopt -s nullglob
# Close what the caller left open (bash keeps the script itself on 255):
# the lab's daemons must not inherit it. A lock taken around `lab.sh up`
# with flock(1) is such a descriptor, and etcd, containerd, the kubelets and
# every other daemon would hold that lock for as long as the lab runs, long
# after its taker exited (seen: the team's /tmp/tflab.lock held by the lab).
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] && [ "$fd" -lt 255 ]; then eval "exec $fd>&-"; fi
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
S=${TFLAB_STATE:-/run/traceflow-lab}
# Where `down` keeps the last lab's logs, per mode.
LOGKEEP=${TFLAB_LOGKEEP:-/var/log/traceflow-lab}
NODES=${TFLAB_NODES:-2}
# A running lab keeps the node count it was started with.
if [ -z "${TFLAB_NODES:-}" ] && [ -s "$S/node-count" ]; then NODES=$(cat "$S/node-count"); fi
# The CNI of the running lab (a lab from before the choice existed ran lab),
# and the one asked for: TFLAB_CNI, else the running one, else lab.
RUNNING_CNI=
if [ -s "$S/cni" ]; then RUNNING_CNI=$(cat "$S/cni"); elif [ -d "$S" ]; then RUNNING_CNI=lab; fi
CNI=${TFLAB_CNI:-${RUNNING_CNI:-lab}}
case $CNI in lab | ovn | antrea) ;; *) echo "TFLAB_CNI=$CNI: want lab, ovn or antrea" >&2; exit 2 ;; esac
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

# stop_component NAME: SIGTERM the daemon (SIGCONT first: a stopped process
# does not act on SIGTERM) and wait until it is gone.
stop_component() {
  local p t0=$SECONDS how=SIGTERM
  p=$(cat "$S/pids/$1.pid" 2>/dev/null) || return 0
  kill -CONT "$p" 2>/dev/null || return 0
  kill -TERM "$p" 2>/dev/null || return 0
  poll "$1 to stop" 10 bash -c "! kill -0 $p" || {
    how=SIGKILL
    kill -KILL "$p" 2>/dev/null || true
    poll "$1 to die" 5 bash -c "! kill -0 $p"
  }
  log "stopped $1 (pid $p) by $how in $((SECONDS - t0))s"
}

# restart NAME: stop one daemon, if it runs, and start it again as up
# started it, then wait until it serves. Idempotent: a daemon that is not
# running is just started. Only the daemons the fault tests restart.
restart() {
  local c=$1 i
  case $c in
    kube-apiserver)
      stop_component "$c"
      apiserver
      poll kube-apiserver 60 kc get --raw /readyz || die "kube-apiserver not ready: see $S/logs/kube-apiserver.log" ;;
    tf-node-*-ovs-vswitchd)
      [ "$CNI" = lab ] || die "restart $c: only in lab mode (the other dataplanes' agents are not restarted with it)"
      i=${c#tf-node-}; i=${i%-ovs-vswitchd}
      [ -d "$S/nodes/$(node_name "$i")" ] || die "restart $c: no node $(node_name "$i")"
      stop_component "$c"
      node_vswitchd "$i"
      node_vswitchd_restarted "$i" ;;
    *) die "restart $c: want kube-apiserver or tf-node-N-ovs-vswitchd" ;;
  esac
  log "restarted $c (pid $(cat "$S/pids/$c.pid"))"
}

components() {
  echo etcd kube-apiserver kube-controller-manager kube-scheduler
  [ "$CNI" = ovn ] && echo ovn-nb-ovsdb ovn-sb-ovsdb ovn-northd lab-ovnkube
  [ "$CNI" = antrea ] && echo antrea-controller
  local i n
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i")
    case $CNI in
      lab) echo "$n-ovsdb-server $n-ovs-vswitchd $n-containerd $n-lab-agent $n-kubelet" ;;
      ovn) echo "$n-ovsdb-server $n-ovs-vswitchd $n-ovn-controller $n-tnl-neigh $n-containerd $n-kubelet" ;;
      antrea) echo "$n-ovsdb-server $n-ovs-vswitchd $n-tnl-neigh $n-containerd $n-kubelet $n-antrea-agent" ;;
    esac
  done
}

# ---------------------------------------------------------------- parts
# shellcheck source=lib/build.sh
. "$here/lib/build.sh"
# shellcheck source=lib/control-plane.sh
. "$here/lib/control-plane.sh"
# shellcheck source=lib/node.sh
. "$here/lib/node.sh"
# shellcheck source=lib/ovn.sh
. "$here/lib/ovn.sh"
# shellcheck source=lib/antrea.sh
. "$here/lib/antrea.sh"

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
  if [ "$CNI" = antrea ]; then antrea_build; fi
  if [ -n "$RUNNING_CNI" ] && [ "$RUNNING_CNI" != "$CNI" ]; then
    log "the lab runs CNI $RUNNING_CNI, TFLAB_CNI=$CNI asks for another: taking it down first"
    down
  fi
  if [ -d "$S" ] && healthy; then
    log "lab already up (CNI $CNI); refreshing images and lab binaries"
    # A test that stopped Antrea's controller or an agent and was killed
    # before its cleanup.
    if [ "$CNI" = antrea ]; then
      antrea_controller_start
      for i in $(seq 1 "$NODES"); do resume "$(node_name "$i")-antrea-agent"; done
    fi
    images
    for i in $(seq 1 "$NODES"); do import_images "$(node_name "$i")"; done
    cp "$root/bin/lab/lab-cni" "$S/cni-bin/.lab-cni" && mv "$S/cni-bin/.lab-cni" "$S/cni-bin/lab-cni"
    if [ "$CNI" = ovn ] && ! cmp -s "$root/bin/lab/lab-ovnkube" "$S/lab-ovnkube"; then
      log "restarting lab-ovnkube (its binary changed)"
      kill "$(cat "$S/pids/lab-ovnkube.pid")"
      poll "lab-ovnkube to stop" 10 bash -c "! kill -0 $(cat "$S/pids/lab-ovnkube.pid")"
      ovn_controller
    fi
    [ "$CNI" = lab ] && for i in $(seq 1 "$NODES"); do
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
  echo "$CNI" >"$S/cni"
  for i in $(seq 1 "$NODES"); do mkdir -p "$S/nodes/$(node_name "$i")"; done
  # unshare --mount=FILE needs FILE on a private mount.
  mount --bind "$S/ns" "$S/ns"
  mount --make-private "$S/ns"
  mkcg "$CG/daemons"
  for i in $(seq 1 "$NODES"); do mkcg "$CG/$(node_name "$i")"; done
  local s
  for s in "${KUBELET_SYSCTLS[@]}"; do echo "$s $(cat /proc/sys/$s)"; done >"$S/sysctls"
  cp "$root/bin/lab/lab-cni" /usr/lib/cni/loopback "$S/cni-bin/"
  if [ "$CNI" = antrea ]; then antrea_cni_bins; fi

  ip link add "$HOSTBR" type bridge
  ip addr add "$HOST_IP/24" dev "$HOSTBR"
  ethtool -K "$HOSTBR" tx off >/dev/null
  ip link set "$HOSTBR" up

  pki
  control_plane
  # Before the nodes: each node binds the database sockets into its /run/ovn.
  [ "$CNI" = ovn ] && ovn_central
  images
  local pids=()
  for i in $(seq 1 "$NODES"); do
    node_up "$i" >"$S/logs/node-up-$i.log" 2>&1 &
    pids+=($!)
  done
  poll kube-apiserver 60 kc get --raw /readyz || die "kube-apiserver not ready: see $S/logs/kube-apiserver.log"
  controllers
  [ "$CNI" = ovn ] && ovn_controller
  if [ "$CNI" = antrea ]; then
    antrea_objects
    antrea_controller
    # Each agent waits for its Node to register (kubelet, started by node_up).
    antrea_agents
  fi
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "$S/logs/node-up-$((i + 1)).log" >&2; die "node $((i + 1)) failed to start"; }
  done
  [ "$CNI" = ovn ] && ovn_annotate_nodes
  poll "$NODES Ready nodes" 60 nodes_ready || die "nodes not Ready: see $S/logs/*-kubelet.log"
  [ "$CNI" = ovn ] && ovn_ready
  if [ "$CNI" = antrea ]; then antrea_ready; fi
  # Pods are refused until the controller-manager has made this account.
  poll "the default service account" 30 kc get serviceaccount default -n default ||
    die "no default service account: see $S/logs/kube-controller-manager.log"
  log "lab up in $((SECONDS - t0))s: $NODES nodes Ready, CNI $CNI"
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
  # The logs outlive the lab, one copy per mode, replaced by the next
  # down: a failure seen in CI can be read after the lab is gone.
  if [ -d "$S/logs" ]; then
    local mode=${RUNNING_CNI:-$CNI}
    rm -rf "${LOGKEEP:?}/$mode" && mkdir -p "$LOGKEEP" && cp -r "$S/logs" "$LOGKEEP/$mode" &&
      log "the lab's logs are kept in $LOGKEEP/$mode"
  fi
  rm -rf "$S"
  log "lab down in $((SECONDS - t0))s"
}

status() {
  if [ ! -d "$S" ]; then echo "lab: down"; return 3; fi
  local c ok=0
  echo "  CNI: $CNI"
  for c in $(components); do
    if [ "$c" = antrea-controller ] && antrea_controller_stopped; then
      printf '  %-34s STOPPED (pid %s; lab.sh antrea-controller start)\n' "$c" "$(cat "$S/pids/$c.pid")"; ok=1
    elif [ "${c%-antrea-agent}" != "$c" ] && stopped "$c"; then
      printf '  %-34s STOPPED (pid %s; lab.sh antrea-agent %s start)\n' "$c" "$(cat "$S/pids/$c.pid")" "${c%-antrea-agent}"; ok=1
    elif alive "$c"; then printf '  %-34s running (pid %s)\n' "$c" "$(cat "$S/pids/$c.pid")"
    else printf '  %-34s NOT RUNNING\n' "$c"; ok=1; fi
  done
  if kc get --raw /readyz >/dev/null 2>&1; then kc get nodes -o wide; else echo "  apiserver not ready"; ok=1; fi
  if [ $ok -eq 0 ] && nodes_ready && [ -n "${TFLAB_CNI:-}" ] && [ "$TFLAB_CNI" != "$RUNNING_CNI" ]; then
    echo "lab: up with CNI $RUNNING_CNI, not TFLAB_CNI=$TFLAB_CNI (make lab-up switches)"; return 1
  elif [ $ok -eq 0 ] && nodes_ready; then
    echo "lab: up (CNI $CNI); export KUBECONFIG=$S/kubeconfig"
  else
    echo "lab: partly up (make lab-down, then make lab-up)"; return 1
  fi
}

# One up or down at a time (the e2e harness and a developer may race). The
# lock is on this script itself, so it leaves no file behind.
lock() { exec 8<"$0"; flock 8; }

# Only up may change the CNI; everything else acts on the running lab.
[ "${1:-}" = up ] || CNI=${RUNNING_CNI:-$CNI}
case "${1:-}" in
  up) lock; up ;;
  down) lock; down ;;
  status) status ;;
  exec) shift; n=$1; shift; in_node "$n" "$@" ;;
  antrea-controller)
    [ "$CNI" = antrea ] || die "antrea-controller: the lab runs CNI $CNI, not antrea"
    case "${2:-}" in
      stop) lock; antrea_controller_stop ;;
      start) lock; antrea_controller_start ;;
      *) echo "usage: $0 antrea-controller stop|start" >&2; exit 2 ;;
    esac ;;
  antrea-agent)
    # An agent that stops answering while its health record still looks
    # fresh (for tests of what auto does when Antrea's agents report no end).
    [ "$CNI" = antrea ] || die "antrea-agent: the lab runs CNI $CNI, not antrea"
    [ $# -eq 3 ] || { echo "usage: $0 antrea-agent NODE stop|start" >&2; exit 2; }
    case "$3" in
      stop) lock; pause "$2-antrea-agent" ;;
      start) lock; resume "$2-antrea-agent" ;;
      *) echo "usage: $0 antrea-agent NODE stop|start" >&2; exit 2 ;;
    esac ;;
  restart)
    lock
    [ $# -eq 2 ] || { echo "usage: $0 restart kube-apiserver|tf-node-N-ovs-vswitchd" >&2; exit 2; }
    [ -d "$S" ] || die "the lab is not up: make lab-up"
    K8S_BIN=$("$here/build-k8s.sh")
    restart "$2" ;;
  images)
    lock
    { [ -d "$S" ] && healthy; } || die "the lab is not up: make lab-up"
    build; images
    for i in $(seq 1 "$NODES"); do import_images "$(node_name "$i")"; done ;;
  errors)
    # What went wrong in the dataplane of the last lab of a mode, from its
    # logs (the running lab's, else the kept ones): the last error lines of
    # the CNI's agents and controllers and of each ovs-vswitchd (klog's E,
    # OVS's ERR). Kubelet and API server logs are too noisy here to help.
    d=$LOGKEEP/${2:-$CNI}
    if [ -d "$S/logs" ] && [ "${2:-$CNI}" = "$RUNNING_CNI" ]; then d=$S/logs; fi
    [ -d "$d" ] || die "no kept logs in $d"
    for f in "$d"/*antrea*.log "$d"/*ovn*.log "$d"/*lab-agent*.log "$d"/*ovs-vswitchd.ovs.log; do
      lines=$(grep -aE '^E[0-9]{4} |\|ERR\|' "$f" | tail -n 15) || true
      [ -z "$lines" ] || printf '==== %s\n%s\n' "$f" "$lines"
    done ;;
  *) echo "usage: $0 up|down|status|exec NODE CMD...|images|antrea-controller stop|start|antrea-agent NODE stop|start|restart DAEMON|errors [MODE]" >&2; exit 2 ;;
esac
