# shellcheck shell=bash
# Antrea mode (TFLAB_CNI=antrea): the real Antrea v2.3.2, built from the
# fixtures' source by build-antrea.sh, run as plain processes.
#   - The cluster holds Antrea's objects from its release manifest antrea.yml
#     without the DaemonSet and the Deployment: CRDs, RBAC, service accounts,
#     the ConfigMap, Service kube-system/antrea (made selector-less, with an
#     EndpointSlice to where the controller listens), the APIServices and the
#     webhooks. The API server runs the aggregation layer for them
#     (control-plane.sh).
#   - antrea-controller runs on the host as a lab daemon with its own identity
#     (a token of service account antrea-controller), in a private mount
#     namespace with a tmpfs on /run/antrea (it writes there).
#   - Per node: antrea-agent in the node's network and mount namespaces (the
#     node's private /run/antrea, /run/openvswitch, /run/netns, /var/lib/cni,
#     /var/log/antrea), on the node's own Open vSwitch with the userspace
#     datapath; it makes br-int, antrea-gw0 and antrea-tun0 and every flow.
#     antrea-cni, installed as `antrea` with host-local IPAM, is the node's CNI,
#     called by the real kubelet and containerd.
# No lab CNI and no lab agent run in this mode. Measured facts behind the
# settings: ../shared/notes/LAB-FACTS.md, section "Antrea".
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here;
# the hooks it calls (mode_antrea_*, described in 10-lab.sh) are at the end.

ANTREA_DIR=$S/antrea
# Where antrea-controller serves (the APIServices, webhooks and agents reach it here).
ANTREA_CONTROLLER_PORT=10349
ANTREA_AGENT_PORT=10350
ANTREA_CONTROLLER_NODE=tflab-control-plane
# The agents' feature gates (LAB-FACTS): Egress and ServiceExternalIP need a
# dummy device, which this kernel lacks (the agent exits); Multicast is off.
ANTREA_GATES='{AntreaProxy: true, Traceflow: true, AntreaPolicy: true, NetworkPolicyStats: true, Egress: false, ServiceExternalIP: false, Multicast: false}'

antrea_build() {
  ANTREA_BIN=$("$here/build-antrea.sh") || die "building Antrea failed (see above)"
}

# antrea_node_ovs I: what the agent needs of the node's OVS beyond br-phy:
# Open_vSwitch.ovs_version (empty, the agent panics). br-int is the agent's.
antrea_node_ovs() {
  local n
  n=$(node_name "$1")
  in_node "$n" ovs-vsctl --timeout=10 set Open_vSwitch . \
    ovs_version="$(ovs-vswitchd --version | awk 'NR==1{print $NF}')"
}

# antrea_cni_conf: Antrea's own CNI configuration, without the chained
# portmap and bandwidth plugins the release adds.
antrea_cni_conf() {
  cat <<'EOF'
{"cniVersion": "0.3.0", "name": "antrea", "plugins": [{"type": "antrea", "ipam": {"type": "host-local"}}]}
EOF
}

# antrea_cni_bins: the plugins containerd calls: antrea-cni as `antrea`, and host-local.
antrea_cni_bins() {
  cp "$ANTREA_BIN/antrea-cni" "$S/cni-bin/.antrea" && mv "$S/cni-bin/.antrea" "$S/cni-bin/antrea"
  cp /usr/lib/cni/host-local "$S/cni-bin/"
}

# antrea_objects: antrea.yml without its DaemonSet and Deployment.
antrea_objects() {
  mkdir -p "$ANTREA_DIR"
  # Documents are separated by '---' lines; drop the two workloads.
  awk '
    function flush() { if (doc != "" && !skip) printf "%s", doc; doc = ""; skip = 0 }
    /^---$/ { flush(); doc = $0 "\n"; next }
    /^kind: (DaemonSet|Deployment)$/ { skip = 1 }
    { doc = doc $0 "\n" }
    END { flush() }' "$ANTREA_BIN/antrea.yml" >"$ANTREA_DIR/antrea.yml"
  grep -q '^kind: DaemonSet' "$ANTREA_DIR/antrea.yml" && die "antrea.yml still holds a DaemonSet"
  # Server-side: the CRDs are too large for the last-applied annotation.
  kc apply --server-side --force-conflicts -f "$ANTREA_DIR/antrea.yml" >"$S/logs/antrea-apply.log" 2>&1 || {
    grep -v -e ' serverside-applied$' -e ' created$' "$S/logs/antrea-apply.log" >&2
    die "applying antrea.yml failed: see $S/logs/antrea-apply.log"
  }
  # No pod backs Service antrea: it gets no selector and one EndpointSlice,
  # to the controller on the host (the API server routes to endpoints,
  # --enable-aggregator-routing, for the APIServices and the webhooks).
  kc -n kube-system patch service antrea --type json -p '[{"op":"remove","path":"/spec/selector"}]' >/dev/null
  kc apply -f - >/dev/null <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: antrea-tflab
  namespace: kube-system
  labels: {kubernetes.io/service-name: antrea, endpointslice.kubernetes.io/managed-by: tflab}
addressType: IPv4
ports: [{name: "", port: $ANTREA_CONTROLLER_PORT, protocol: TCP}]
endpoints: [{addresses: ["$HOST_IP"], conditions: {ready: true}}]
EOF
  kc wait --for condition=established --timeout=30s crd --all >/dev/null ||
    die "Antrea's CRDs were not established"
}

# antrea_kubeconfig FILE SERVER CA SERVERNAME TOKEN
antrea_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$2", certificate-authority: "$3"${4:+, tls-server-name: "$4"}}
users:
- name: u
  user: {token: "$5"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
EOF
  chmod 600 "$1"
}

# antrea_controller: antrea-controller on the host, as service account
# kube-system/antrea-controller.
antrea_controller() {
  mkdir -p "$ANTREA_DIR"
  local token
  token=$(kc -n kube-system create token antrea-controller --duration=720h) || die "no token for antrea-controller"
  antrea_kubeconfig "$ANTREA_DIR/controller.kubeconfig" "$APISERVER" "$S/pki/ca.crt" "" "$token"
  cat >"$ANTREA_DIR/antrea-controller.conf" <<EOF
clientConnection: {kubeconfig: "$ANTREA_DIR/controller.kubeconfig"}
featureGates: {Traceflow: true, AntreaPolicy: true, NetworkPolicyStats: true, Egress: false, ServiceExternalIP: false, Multicast: false}
apiPort: $ANTREA_CONTROLLER_PORT
selfSignedCert: true
nodeIPAM: {enableNodeIPAM: false}
EOF
  # Its /run/antrea (self-signed certificate, loopback token) is a tmpfs of
  # its own; the mount point on the host is recorded for down.
  [ -e /run/antrea ] || { echo /run/antrea >>"$S/host-dirs"; mkdir -p /run/antrea; }
  cp "$ANTREA_BIN/antrea-controller" "$ANTREA_DIR/antrea-controller"
  # shellcheck disable=SC2016 # expanded by the inner shell
  start antrea-controller - env POD_NAMESPACE=kube-system POD_NAME=antrea-controller \
    NODE_NAME="$ANTREA_CONTROLLER_NODE" SERVICEACCOUNT_NAME=antrea-controller ANTREA_CONFIG_MAP_NAME=antrea-config \
    unshare --mount --propagation private sh -c 'mount -t tmpfs tflab-antrea /run/antrea && exec "$@"' _ \
    "$ANTREA_DIR/antrea-controller" --config="$ANTREA_DIR/antrea-controller.conf"
}

# antrea_ca_published: the controller has published its CA (agents trust it).
antrea_ca_published() {
  kc -n kube-system get configmap antrea-ca -o jsonpath='{.data.ca\.crt}' 2>/dev/null | grep -q 'BEGIN CERTIFICATE'
}

# antrea_agents: once the controller's CA is published and each Node is
# registered with its podCIDR set, one antrea-agent per node.
antrea_agents() {
  poll "antrea-controller to publish its CA" 60 antrea_ca_published ||
    die "antrea-controller published no CA: see $S/logs/antrea-controller.log"
  kc -n kube-system get configmap antrea-ca -o jsonpath='{.data.ca\.crt}' >"$ANTREA_DIR/antrea-ca.crt"
  local token i
  token=$(kc -n kube-system create token antrea-agent --duration=720h) || die "no token for antrea-agent"
  # To the API server, and to the controller directly (its certificate names the Service).
  antrea_kubeconfig "$ANTREA_DIR/agent.kubeconfig" "$APISERVER" "$S/pki/ca.crt" "" "$token"
  antrea_kubeconfig "$ANTREA_DIR/agent-antrea.kubeconfig" "https://$HOST_IP:$ANTREA_CONTROLLER_PORT" \
    "$ANTREA_DIR/antrea-ca.crt" antrea.kube-system.svc "$token"
  cp "$ANTREA_BIN/antrea-agent" "$ANTREA_DIR/antrea-agent"
  for i in $(seq 1 "$NODES"); do antrea_agent "$i"; done
}

# antrea_agent I: the agent of node I (its Node must be registered: the agent
# exits when it cannot get it).
antrea_agent() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  poll "$n to register" 60 kc get node "$n" || die "$n did not register: see $S/logs/$n-kubelet.log"
  # What kube-controller-manager's node IPAM would set; the agent waits for it.
  if [ -z "$(kc get node "$n" -o jsonpath='{.spec.podCIDR}')" ]; then
    kc patch node "$n" --type merge \
      -p "{\"spec\":{\"podCIDR\":\"$(node_cidr "$i")\",\"podCIDRs\":[\"$(node_cidr "$i")\"]}}" >/dev/null
  fi
  cat >"$nd/antrea-agent.conf" <<EOF
clientConnection: {kubeconfig: "$ANTREA_DIR/agent.kubeconfig"}
antreaClientConnection: {kubeconfig: "$ANTREA_DIR/agent-antrea.kubeconfig"}
featureGates: $ANTREA_GATES
ovsBridge: br-int
ovsDatapathType: netdev
ovsRunDir: /var/run/openvswitch
hostGateway: antrea-gw0
trafficEncapMode: encap
tunnelType: geneve
# Required with the userspace datapath: with offload on, TCP fails while ping works.
disableTXChecksumOffload: true
# The default /host assumes a pod with the host's /proc mounted there.
hostProcPathPrefix: /
serviceCIDR: $SVC_RANGE
apiPort: $ANTREA_AGENT_PORT
nodePortLocal: {enable: false}
multicast: {enable: false}
antreaProxy: {enable: true, proxyAll: true}
EOF
  start "$n-antrea-agent" "$n" env NODE_NAME="$n" POD_NAME="antrea-agent-$n" POD_NAMESPACE=kube-system \
    "$ANTREA_DIR/antrea-agent" --config="$nd/antrea-agent.conf"
}

# antrea_agents_ready: every node's agent has reported to the API server, and
# its CNI server listens (pods can start).
antrea_agents_ready() {
  local i n
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i")
    [ -S "$S/nodes/$n/root/run/antrea/cni.sock" ] || return 1
    # The controller creates the record; the agent fills it in (version,
    # conditions) once it runs, then heartbeats once a minute.
    [ -n "$(kc get antreaagentinfo "$n" -o jsonpath='{.version}' 2>/dev/null)" ] || return 1
  done
}

# antrea_apiservices_available: every APIService served by the controller is Available.
antrea_apiservices_available() {
  local s
  s=$(kc get apiservices -l app=antrea \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}')
  [ -n "$s" ] && ! grep -qv '^True$' <<<"$s"
}

# antrea_ready: lab-up ends only when the agents serve CNI and the controller's APIs are Available.
antrea_ready() {
  poll "every antrea-agent to report and serve CNI" 90 antrea_agents_ready ||
    die "antrea-agent not ready: see $S/logs/*-antrea-agent.log"
  poll "Antrea's APIServices to be Available" 60 antrea_apiservices_available ||
    die "Antrea's APIServices are not Available: see $S/logs/antrea-controller.log and kube-apiserver.log"
}

# stopped DAEMON: the lab's DAEMON (antrea-controller, NODE-antrea-agent) is
# stopped (SIGSTOP: state T).
stopped() {
  local p st
  p=$(cat "$S/pids/$1.pid" 2>/dev/null) || return 1
  st=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || return 1
  [ "${st%% *}" = T ]
}
antrea_controller_stopped() { stopped antrea-controller; }

# pause DAEMON: stop DAEMON (SIGSTOP), not kill it: stopped, it acts on
# nothing, writes no heartbeat and answers no one, and its health record
# stays as its last heartbeat left it, for up to a heartbeat's age. resume
# brings it back as it was.
pause() {
  alive "$1" || die "$1 is not running"
  kill -STOP "$(cat "$S/pids/$1.pid")"
  poll "$1 to stop" 10 stopped "$1" || die "$1 did not stop"
  log "$1 stopped (resume it with lab.sh)"
}

# resume DAEMON: resume a stopped DAEMON.
resume() {
  alive "$1" || die "$1 is not running: make lab-down, then make lab-up"
  stopped "$1" || return 0
  kill -CONT "$(cat "$S/pids/$1.pid")"
  poll "$1 to resume" 10 bash -c "! sed 's/^.*) //' /proc/$(cat "$S/pids/$1.pid")/stat | grep -q '^T '" ||
    die "$1 did not resume"
  log "$1 resumed"
}

# antrea_controller_stop (lab.sh antrea-controller stop): stop the controller,
# for tests of helper mode where Antrea is installed and its controller is
# down. Paused, not killed: antrea-controller v2.3.2 makes a new self-signed
# CA at every start, and the agents read its CA from a file
# (agent-antrea.kubeconfig), so a restarted controller would be one the
# agents no longer trust (no policies, ControllerConnectionUp false).
antrea_controller_stop() { pause antrea-controller; }

# antrea_controller_start (lab.sh antrea-controller start, and lab.sh up on a
# healthy lab): resume a stopped controller and wait for its APIs.
antrea_controller_start() {
  antrea_controller_stopped || return 0
  resume antrea-controller
  poll "Antrea's APIServices to be Available" 90 antrea_apiservices_available ||
    die "Antrea's APIServices are not Available after resuming antrea-controller: see $S/logs/antrea-controller.log"
}

# ---------------------------------------------------------------- hooks
mode_antrea_daemons() { echo antrea-controller; }
mode_antrea_node_daemons() { echo "$1-ovsdb-server $1-ovs-vswitchd $1-tnl-neigh $1-containerd $1-kubelet $1-antrea-agent"; }
mode_antrea_logs() { echo '*antrea*.log'; }
mode_antrea_build() { antrea_build; }
# A test that stopped Antrea's controller or an agent and was killed before
# its cleanup.
mode_antrea_resume() {
  local i
  antrea_controller_start
  for i in $(seq 1 "$NODES"); do resume "$(node_name "$i")-antrea-agent"; done
}
mode_antrea_cni_bins() { antrea_cni_bins; }
# The aggregation layer: the API server proxies to Antrea's APIServices with
# a client certificate of the front-proxy CA.
mode_antrea_pki() {
  ca front-proxy-ca tflab-front-proxy-ca
  CERT_CA=front-proxy-ca cert front-proxy-client /CN=front-proxy-client &
}
# Antrea's APIServices (and its webhooks) are reached at the endpoints of
# Service kube-system/antrea: no kube-proxy runs on the host.
mode_antrea_apiserver_flags() {
  printf '%s\n' --requestheader-client-ca-file="$S/pki/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$S/pki/front-proxy-client.crt" --proxy-client-key-file="$S/pki/front-proxy-client.key" \
    --enable-aggregator-routing=true
}
# The extra private paths a node gets in this mode.
mode_antrea_node_binds() { echo /run/antrea /var/log/antrea; }
mode_antrea_node_ovs() {
  antrea_node_ovs "$1"
  node_tnl_neigh "$1"
}
mode_antrea_cni_conf() { antrea_cni_conf >"$S/nodes/$(node_name "$1")/root/etc/cni/net.d/10-antrea.conflist"; }
mode_antrea_cluster() {
  antrea_objects
  antrea_controller
  # Each agent waits for its Node to register (kubelet, started by node_up).
  antrea_agents
}
mode_antrea_ready() { antrea_ready; }
mode_antrea_stopped_hint() {
  if [ "$1" = antrea-controller ] && antrea_controller_stopped; then
    echo "lab.sh antrea-controller start"
  elif [ "${1%-antrea-agent}" != "$1" ] && stopped "$1"; then
    echo "lab.sh antrea-agent ${1%-antrea-agent} start"
  else
    return 1
  fi
}

mode_antrea_usage() { echo "antrea-controller stop|start|antrea-agent NODE stop|start"; }
mode_antrea_cmd_antrea_controller() {
  case "${1:-}" in
    stop) lock; antrea_controller_stop ;;
    start) lock; antrea_controller_start ;;
    *) echo "usage: $0 antrea-controller stop|start" >&2; exit 2 ;;
  esac
}
# An agent that stops answering while its health record still looks fresh
# (for tests of what auto does when Antrea's agents report no end).
mode_antrea_cmd_antrea_agent() {
  [ $# -eq 2 ] || { echo "usage: $0 antrea-agent NODE stop|start" >&2; exit 2; }
  case "$2" in
    stop) lock; pause "$1-antrea-agent" ;;
    start) lock; resume "$1-antrea-agent" ;;
    *) echo "usage: $0 antrea-agent NODE stop|start" >&2; exit 2 ;;
  esac
}
