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
# and the dataplane TFLAB_CNI names, one file per mode in modes/ (how a mode
# plugs in: modes/10-lab.sh):
#   lab  the lab CNI and the lab agent, which programs an Antrea-like pipeline
#        (the default; modes/10-lab.sh);
#   ovn  real OVN as OVN-Kubernetes shapes it (modes/20-ovn.sh): ovsdb-servers,
#        ovn-northd and lab-ovnkube on the host, ovn-controller per node, and
#        the lab CNI in its OVN mode;
#   antrea  the real Antrea v2.3.2 (modes/30-antrea.sh), built from the fixtures'
#        source: antrea-controller on the host, antrea-agent per node, and
#        antrea-cni as the nodes' CNI.
#   ovnk the genuine OVN-Kubernetes (modes/40-ovnk.sh), built from the fixtures'
#        source: its cluster manager on the host; per node its own zone (NB, SB,
#        ovn-northd, ovn-controller of OVN 26.03), ovnkube and its CNI shim, on
#        the fixture's OVS 4.0 with breth0 as the gateway bridge.
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
# words A B C: "A, B or C".
words() {
  local s=$*; s=${s// /, }
  [ $# -lt 2 ] || s="${s%, *} or ${!#}"
  echo "$s"
}
# The modes are the files in modes/, NN-MODE.sh, in the order of NN.
MODES=()
for f in "$here"/modes/*.sh; do f=${f##*/}; f=${f%.sh}; MODES+=("${f#*-}"); done
if [[ " ${MODES[*]} " != *" $CNI "* ]]; then echo "TFLAB_CNI=$CNI: want $(words "${MODES[@]}")" >&2; exit 2; fi
CG=tflab
HOSTBR=tflab0
HOST_IP=10.89.0.1
# The underlay: the host and the nodes' addresses. To the pods it is the
# network outside the cluster (the host answers TCP, UDP and ping there).
UNDERLAY_NET=10.89.0.0/24
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

# ovsdb_listening SOCKET...: every socket answers an OVSDB request. A socket
# file exists from bind() on, before ovsdb-server listens on it, and a client
# that connects in between is refused (ovs-vsctl and ovn-nbctl do not retry),
# so `test -S` is not enough.
ovsdb_listening() {
  local s
  for s in "$@"; do ovsdb-client --timeout=5 list-dbs "unix:$s" || return 1; done
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
  rm -f "$S/pids/$name.stopping"
}

# alive NAME: the daemon's process exists and is not a zombie. kill -0
# succeeds on a zombie, and this machine's PID 1 may leave a dead daemon
# unreaped (an ovs-vswitchd that aborted showed as running).
alive() {
  local p st
  p=$(cat "$S/pids/$1.pid" 2>/dev/null) && st=$(cat "/proc/$p/stat" 2>/dev/null) || return 1
  # pid (comm) STATE ...: comm may hold spaces and parentheses.
  st=${st##*) }
  [ "${st:0:1}" != Z ] && [ "${st:0:1}" != X ]
}

# stop_component NAME: SIGTERM the daemon (SIGCONT first: a stopped process
# does not act on SIGTERM) and wait until it is gone. NAME.stopping, beside
# its PID file until start writes the next one, tells the e2e suite's watch
# of the daemons (test/e2e/labwatch_test.go) that it goes on purpose.
stop_component() {
  local p t0=$SECONDS how=SIGTERM
  p=$(cat "$S/pids/$1.pid" 2>/dev/null) || return 0
  : >"$S/pids/$1.stopping"
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
      mode_has vswitchd_restarted ||
        die "restart $c: only in $(modes_with vswitchd_restarted) mode (the other dataplanes' agents are not restarted with it)"
      i=${c#tf-node-}; i=${i%-ovs-vswitchd}
      [ -d "$S/nodes/$(node_name "$i")" ] || die "restart $c: no node $(node_name "$i")"
      stop_component "$c"
      node_vswitchd "$i"
      mode_hook vswitchd_restarted "$i" ;;
    *) die "restart $c: want kube-apiserver or tf-node-N-ovs-vswitchd" ;;
  esac
  log "restarted $c (pid $(cat "$S/pids/$c.pid"))"
}

components() {
  echo etcd kube-apiserver kube-controller-manager kube-scheduler
  mode_hook daemons
  local i
  for i in $(seq 1 "$NODES"); do mode_hook node_daemons "$(node_name "$i")"; done
}

# mode_has HOOK [MODE]: MODE (the lab's, by default) defines mode_MODE_HOOK.
mode_has() { declare -F "mode_${2:-$CNI}_$1" >/dev/null; }
# mode_hook HOOK ARGS...: the lab's mode's HOOK, where it has one.
mode_hook() {
  local h=$1; shift
  if mode_has "$h"; then "mode_${CNI}_$h" "$@"; fi
}
# modes_with HOOK: the modes that define HOOK, as a sentence would list them.
modes_with() {
  local m out=()
  for m in "${MODES[@]}"; do if mode_has "$1" "$m"; then out+=("$m"); fi; done
  words "${out[@]}"
}

# ---------------------------------------------------------------- parts
# shellcheck source=lib/build.sh
. "$here/lib/build.sh"
# shellcheck source=lib/control-plane.sh
. "$here/lib/control-plane.sh"
# shellcheck source=lib/node.sh
. "$here/lib/node.sh"
# shellcheck source=lib/teardown.sh
. "$here/lib/teardown.sh"
for f in "$here"/modes/*.sh; do
  # shellcheck source=/dev/null
  . "$f"
done

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
  mode_hook build
  if [ -n "$RUNNING_CNI" ] && [ "$RUNNING_CNI" != "$CNI" ]; then
    log "the lab runs CNI $RUNNING_CNI, TFLAB_CNI=$CNI asks for another: taking it down first"
    down
  fi
  if [ -d "$S" ] && healthy; then
    log "lab already up (CNI $CNI); refreshing images and lab binaries"
    mode_hook resume
    images
    for i in $(seq 1 "$NODES"); do import_images "$(node_name "$i")"; done
    cp "$root/bin/lab/lab-cni" "$S/cni-bin/.lab-cni" && mv "$S/cni-bin/.lab-cni" "$S/cni-bin/lab-cni"
    mode_hook refresh
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
  mode_hook cni_bins

  ip link add "$HOSTBR" type bridge
  ip addr add "$HOST_IP/24" dev "$HOSTBR"
  ethtool -K "$HOSTBR" tx off >/dev/null
  ip link set "$HOSTBR" up

  pki
  control_plane
  mode_hook central
  images
  local pids=()
  for i in $(seq 1 "$NODES"); do
    node_up "$i" >"$S/logs/node-up-$i.log" 2>&1 &
    pids+=($!)
  done
  poll kube-apiserver 60 kc get --raw /readyz || die "kube-apiserver not ready: see $S/logs/kube-apiserver.log"
  controllers
  mode_hook cluster
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { cat "$S/logs/node-up-$((i + 1)).log" >&2; die "node $((i + 1)) failed to start"; }
  done
  mode_hook joined
  poll "$NODES Ready nodes" 60 nodes_ready || die "nodes not Ready: see $S/logs/*-kubelet.log"
  mode_hook ready
  # Pods are refused until the controller-manager has made this account.
  poll "the default service account" 30 kc get serviceaccount default -n default ||
    die "no default service account: see $S/logs/kube-controller-manager.log"
  log "lab up in $((SECONDS - t0))s: $NODES nodes Ready, CNI $CNI"
  kc get nodes -o wide >&2
  echo "export KUBECONFIG=$S/kubeconfig"
}

status() {
  if [ ! -d "$S" ]; then echo "lab: down"; return 3; fi
  local c ok=0 hint
  echo "  CNI: $CNI"
  for c in $(components); do
    if mode_has stopped_hint && hint=$(mode_hook stopped_hint "$c"); then
      printf '  %-34s STOPPED (pid %s; %s)\n' "$c" "$(cat "$S/pids/$c.pid")" "$hint"; ok=1
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
# The Open vSwitch the nodes run: the host's (Debian's), or the one the mode
# names (its hook puts that one's commands first on PATH and sets OVS_SCHEMA),
# for every command, so that exec and restart reach the same OVS as up.
OVS_SCHEMA=/usr/share/openvswitch/vswitch.ovsschema
# The node's underlay bridge, holding eth0 and the node IP (a mode's ovs hook
# may name it otherwise).
PHY_BR=br-phy
if mode_has ovs && ! mode_hook ovs && [ "${1:-}" = up ]; then die "no Open vSwitch for CNI $CNI (above)"; fi
case "${1:-}" in
  up) lock; up ;;
  down) lock; down ;;
  status) status ;;
  exec) shift; n=$1; shift; in_node "$n" "$@" ;;
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
    globs=() logs=()
    # Each mode's logs, the last mode's first (the order this list always had).
    for ((k = ${#MODES[@]} - 1; k >= 0; k--)); do
      m=${MODES[$k]}
      if mode_has logs "$m"; then read -ra g <<<"$("mode_${m}_logs")"; globs+=("${g[@]}"); fi
    done
    # shellcheck disable=SC2206 # the globs are meant to expand
    for g in "${globs[@]}" '*ovs-vswitchd.ovs.log'; do logs+=("$d"/$g); done
    declare -A seen=()
    for f in "${logs[@]}"; do
      # Two modes' globs may match one log (ovn's *ovn*.log, ovnk's).
      [ -z "${seen[$f]:-}" ] || continue
      seen[$f]=1
      lines=$(grep -aE '^E[0-9]{4} |\|ERR\|' "$f" | tail -n 15) || true
      [ -z "$lines" ] || printf '==== %s\n%s\n' "$f" "$lines"
    done ;;
  *)
    # A command of one mode (mode_MODE_cmd_NAME), refused in the others.
    for m in "${MODES[@]}"; do
      if [ -n "${1:-}" ] && mode_has "cmd_${1//-/_}" "$m"; then
        [ "$CNI" = "$m" ] || die "$1: the lab runs CNI $CNI, not $m"
        c=$1; shift; "mode_${m}_cmd_${c//-/_}" "$@"; exit
      fi
    done
    usage=()
    for m in "${MODES[@]}"; do if mode_has usage "$m"; then usage+=("$("mode_${m}_usage")"); fi; done
    u=$(IFS='|'; echo "${usage[*]}")
    echo "usage: $0 up|down|status|exec NODE CMD...|images|${u:+$u|}restart DAEMON|errors [MODE]" >&2; exit 2 ;;
esac
