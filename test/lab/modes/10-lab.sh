# shellcheck shell=bash
# Lab mode (TFLAB_CNI=lab, the default): the lab CNI and the lab agent, which
# programs an Antrea-like pipeline on each node's br-int (made here, with its
# Geneve tunnel and gateway ports).
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here.
#
# A mode is one file in test/lab/modes, named NN-MODE.sh (NN orders the modes
# wherever they are listed, and the e2e runs). lab.sh calls its functions
# mode_MODE_HOOK where the modes differ; every hook but daemons and
# node_daemons is optional:
#   daemons                 the host's daemons of the mode (lab.sh status, healthy)
#   node_daemons NODE       NODE's daemons, in the order status lists them
#   ovs                     the nodes run another Open vSwitch than the host's: put its
#                           commands first on PATH, set OVS_SCHEMA, and PHY_BR where the
#                           underlay bridge is not br-phy (every lab.sh command)
#   build                   after build: the mode's own binaries
#   resume                  lab.sh up on a healthy lab, before the images are refreshed
#   refresh                 lab.sh up on a healthy lab, after: restart what was rebuilt
#   cni_bins                the CNI plugins to put in $S/cni-bin beside lab-cni and loopback
#   pki                     certificates beyond the control plane's (run inside pki)
#   apiserver_flags         kube-apiserver's extra flags, one a line
#   central                 after the control plane, before the nodes
#   node_binds              extra paths a node gets private copies of
#   node_mounts NODE_DIR    extra mount commands run in a node's new mount namespace
#   node_ovsdb I            node I's OVS database before its ovs-vswitchd starts
#   node_ovs I              node I's OVS beyond the underlay bridge (PHY_BR)
#   cni_conf I              write node I's CNI configuration
#   node_up I               after containerd and the images, before the kubelet
#   cluster                 once the API server serves and the controllers run
#   joined                  once every node has started
#   ready                   once the nodes are Ready: wait for the dataplane
#   vswitchd_restarted I    after lab.sh restart tf-node-I-ovs-vswitchd (without it, refused)
#   stopped_hint DAEMON     DAEMON is stopped on purpose: print how to start it
#   logs                    globs of the logs lab.sh errors reads
#   usage, cmd_NAME ARGS    lab.sh NAME ARGS, a command of this mode only

mode_lab_daemons() { :; }
mode_lab_node_daemons() { echo "$1-ovsdb-server $1-ovs-vswitchd $1-containerd $1-lab-agent $1-kubelet"; }
mode_lab_logs() { echo '*lab-agent*.log'; }

# br-int as the lab agent expects it: the tunnel on port 1, the gateway on 2.
mode_lab_node_ovs() {
  local i=$1 n
  n=$(node_name "$i")
  in_node "$n" bash -ec "
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

mode_lab_cni_conf() {
  local i=$1 nd
  nd=$S/nodes/$(node_name "$i")
  cat >"$nd/root/etc/cni/net.d/10-tflab.conf" <<EOF
{"cniVersion": "0.4.0", "name": "tflab", "type": "lab-cni", "bridge": "br-int",
 "subnet": "$(node_cidr "$i")", "gateway": "10.244.$i.1", "routes": ["$POD_RANGE", "$SVC_RANGE", "169.254.0.253/32", "$UNDERLAY_NET"],
 "mtu": 1450, "agentSocket": "$nd/agent.sock", "dataDir": "/var/lib/cni/tflab"}
EOF
}

mode_lab_node_up() { node_agent "$1"; }

node_agent() {
  local i=$1 n nd
  n=$(node_name "$i") nd=$S/nodes/$(node_name "$i")
  cp "$root/bin/lab/lab-agent" "$nd/lab-agent"
  start "$n-lab-agent" "$n" "$nd/lab-agent" -kubeconfig "$S/kubeconfig" -node "$n" -socket "$nd/agent.sock" \
    -state-dir "$nd" -pod-cidr "$(node_cidr "$i")" -pod-range "$POD_RANGE" -gateway-mac "$(ip_mac "10.244.$i.1")" \
    -outside "$UNDERLAY_NET"
}

# A rebuilt lab agent replaces the running one.
mode_lab_refresh() {
  local i n
  for i in $(seq 1 "$NODES"); do
    n=$(node_name "$i")
    if ! cmp -s "$root/bin/lab/lab-agent" "$S/nodes/$n/lab-agent"; then
      log "restarting $n's lab agent (its binary changed)"
      stop_component "$n-lab-agent"
      node_agent "$i"
    fi
  done
}

# mode_lab_vswitchd_restarted I: a new ovs-vswitchd made the bridges'
# internal ports (br-phy, antrea-gw0) afresh, without their addresses and
# routes, and with no flows: put back what node_ovs set, and restart the lab
# agent, which installs its pipeline when it starts.
mode_lab_vswitchd_restarted() {
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
