// Command lab-agent is the lab's network agent, one per node, running in the
// node's namespaces. It watches Pods, Nodes, Services, EndpointSlices,
// Namespaces and NetworkPolicies, reads its pods' ports from the node's
// OVSDB, and programs br-int with the Antrea-like pipeline built by
// test/lab/agent. The lab CNI plugin asks it, over a unix socket, to sync
// before a pod starts.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/agent"
	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/ovsjson"
)

type options struct {
	kubeconfig, node, bridge, socket, stateDir, underlayBridge, ovsRundir string
	podCIDR, podRange                                                     netip.Prefix
	cfg                                                                   agent.Config
}

// agentCookie marks every flow the agent installs ("la", lab agent), so a
// resync replaces exactly those.
const agentCookie = "0x6c61000000000000"

// flowCount is dump-aggregate's count of flows.
var flowCount = regexp.MustCompile(`flow_count=(\d+)`)

// agentFlowCount counts the agent's flows in the bridge.
func agentFlowCount(bridge string) (int, error) {
	out, err := ovs("ovs-ofctl", "-O", "OpenFlow15", "dump-aggregate", bridge, "cookie="+agentCookie+"/-1")
	if err != nil {
		return 0, err
	}
	m := flowCount.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("ovs-ofctl dump-aggregate: no flow_count in %q", out)
	}
	return strconv.Atoi(m[1])
}

func main() {
	if err := run(); err != nil {
		log.Fatalf("lab-agent: %v", err)
	}
}

// parseFlags reads the agent's options.
func parseFlags() (options, error) {
	var o options
	var podCIDR, podRange, gwMAC, outside string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig")
	flag.StringVar(&o.node, "node", "", "this node's name")
	flag.StringVar(&o.bridge, "bridge", "br-int", "integration bridge")
	flag.StringVar(&o.underlayBridge, "underlay-bridge", "br-phy", "bridge holding the node IP (tunnel neighbours are seeded on it)")
	flag.StringVar(&o.socket, "socket", "", "unix socket the CNI plugin asks to sync on")
	flag.StringVar(&o.stateDir, "state-dir", "", "directory for flow files")
	flag.StringVar(&o.ovsRundir, "ovs-rundir", "/run/openvswitch", "where ovs-vswitchd keeps BRIDGE.mgmt")
	flag.StringVar(&podCIDR, "pod-cidr", "", "this node's pod CIDR")
	flag.StringVar(&podRange, "pod-range", "10.244.0.0/16", "the cluster's pod range")
	flag.StringVar(&gwMAC, "gateway-mac", "", "MAC the pods' gateway answers with")
	flag.StringVar(&outside, "outside", "", "networks outside the cluster that pods reach through antrea-gw0, masqueraded (comma-separated prefixes)")
	flag.IntVar(&o.cfg.TunnelPort, "tunnel-ofport", 1, "OpenFlow port of the Geneve tunnel")
	flag.IntVar(&o.cfg.GatewayPort, "gateway-ofport", 2, "OpenFlow port of antrea-gw0 (0: none)")
	flag.Parse()
	var err error
	if o.podCIDR, err = netip.ParsePrefix(podCIDR); err != nil {
		return o, fmt.Errorf("-pod-cidr: %w", err)
	}
	if o.podRange, err = netip.ParsePrefix(podRange); err != nil {
		return o, fmt.Errorf("-pod-range: %w", err)
	}
	if o.cfg.Outside, err = parseOutside(outside); err != nil {
		return o, err
	}
	o.cfg.GatewayIP = o.podCIDR.Masked().Addr().Next()
	o.cfg.GatewayMAC = gwMAC
	if o.node == "" || o.socket == "" || o.stateDir == "" || gwMAC == "" {
		return o, errors.New("-node, -socket, -state-dir and -gateway-mac are required")
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	if len(o.cfg.Outside) > 0 && o.cfg.GatewayPort > 0 {
		if err := ensureMasquerade(o.podRange); err != nil {
			return err
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := setTableNames(o.bridge); err != nil {
		return err
	}
	// Groups left by an earlier agent have ids this one does not know.
	if _, err := ovs("ovs-ofctl", "-O", "OpenFlow15", "del-groups", o.bridge); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	f := informers.NewSharedInformerFactory(cs, 0)
	a := &agentState{o: o, cs: cs, groupIDs: map[string]int{}, kick: make(chan struct{}, 1), reqs: make(chan chan error, 64),
		pods: f.Core().V1().Pods().Lister(), nodes: f.Core().V1().Nodes().Lister(), nss: f.Core().V1().Namespaces().Lister(),
		svcs: f.Core().V1().Services().Lister(), slices: f.Discovery().V1().EndpointSlices().Lister(),
		nps: f.Networking().V1().NetworkPolicies().Lister()}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.trigger() },
		UpdateFunc: func(any, any) { a.trigger() },
		DeleteFunc: func(any) { a.trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer(), f.Core().V1().Namespaces().Informer(),
		f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer(),
		f.Networking().V1().NetworkPolicies().Informer(),
	} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache for %v did not sync", typ)
		}
	}
	if err := a.serve(ctx); err != nil {
		return err
	}
	a.rejecter = &rejecter{bridge: o.bridge, cfg: o.cfg}
	go a.rejecter.run(ctx, o.ovsRundir)
	log.Printf("lab-agent on %s: pod CIDR %s, gateway %s", o.node, o.podCIDR, o.cfg.GatewayIP)
	a.loop(ctx)
	return nil
}

func ovs(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput() //nolint:gosec // the OVS tools, with arguments this agent built
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// setTableNames creates Flow_Table rows so that OpenFlow TABLE_FEATURES and
// `ovs-ofctl dump-flows --names` report Antrea's table names.
func setTableNames(bridge string) error {
	var args []string
	var set []string
	for i, n := range agent.TableNames {
		args = append(args, "--", fmt.Sprintf("--id=@t%d", i), "create", "Flow_Table", "name="+n)
		set = append(set, fmt.Sprintf("flow_tables:%d=@t%d", i, i))
	}
	args = append(args, "--", "set", "Bridge", bridge)
	args = append(args, set...)
	_, err := ovs("ovs-vsctl", args...)
	return err
}

type agentState struct {
	o          options
	cs         kubernetes.Interface
	groupIDs   map[string]int
	nextID     int
	kick       chan struct{}
	reqs       chan chan error
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	nss        corelisters.NamespaceLister
	svcs       corelisters.ServiceLister
	slices     discoverylisters.EndpointSliceLister
	nps        networkinglisters.NetworkPolicyLister
	lastGroups map[int]bool
	rejecter   *rejecter
	// tookOver: the first sync, which clears the bridge, is done.
	tookOver bool
	// applied are the flows the last sync left in the bridge, as written.
	applied map[string]bool
}

func (a *agentState) trigger() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// serve answers the CNI plugin: "sync" returns "ok" after a sync that began
// after the request, so the new pod's port is in it.
func (a *agentState) serve(ctx context.Context) error {
	_ = os.Remove(a.o.socket)
	if err := os.MkdirAll(filepath.Dir(a.o.socket), 0o750); err != nil {
		return err
	}
	l, err := net.Listen("unix", a.o.socket)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					return
				}
				done := make(chan error, 1)
				a.reqs <- done
				if err := <-done; err != nil {
					_, _ = fmt.Fprintf(c, "error: %v\n", err)
					return
				}
				_, _ = fmt.Fprintln(c, "ok")
			}()
		}
	}()
	return nil
}

func (a *agentState) loop(ctx context.Context) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	a.trigger()
	for {
		var waiting []chan error
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-tick.C:
		case r := <-a.reqs:
			waiting = append(waiting, r)
		}
		// Coalesce what arrived meanwhile into this one sync.
	drain:
		for {
			select {
			case r := <-a.reqs:
				waiting = append(waiting, r)
			case <-a.kick:
			default:
				break drain
			}
		}
		err := a.sync(ctx)
		if err != nil {
			log.Printf("sync: %v", err)
		}
		for _, w := range waiting {
			w <- err
		}
	}
}

type ovsRow struct {
	name   string
	ofport int
	ids    map[string]string
}

func localPorts() ([]ovsRow, error) {
	out, err := ovs("ovs-vsctl", "--format=json", "--columns=name,ofport,external_ids", "list", "Interface")
	if err != nil {
		return nil, err
	}
	var t struct {
		Data [][]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &t); err != nil {
		return nil, err
	}
	var rows []ovsRow
	for _, d := range t.Data {
		if len(d) != 3 {
			continue
		}
		var r ovsRow
		_ = json.Unmarshal(d[0], &r.name)
		_ = json.Unmarshal(d[1], &r.ofport)
		r.ids = ovsjson.Map(d[2])
		rows = append(rows, r)
	}
	return rows, nil
}

// underlayMAC is the MAC every lab node gives its underlay bridge, derived
// from the node IP, so tunnel neighbours can be seeded without ARP.
func underlayMAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

func (a *agentState) sync(ctx context.Context) error {
	rows, err := localPorts()
	if err != nil {
		return err
	}
	var st agent.State
	local := map[netip.Addr]bool{}
	for _, r := range rows {
		ip, err := netip.ParseAddr(r.ids["ip-address"])
		if r.ids["antrea-type"] != "container" || err != nil || r.ofport <= 0 {
			continue
		}
		st.Pods = append(st.Pods, agent.LocalPod{Namespace: r.ids["pod-namespace"], Name: r.ids["pod-name"], IP: ip, MAC: r.ids["attached-mac"], OFPort: r.ofport})
		local[ip] = true
	}
	nodes, _ := a.nodes.List(labels.Everything())
	for _, n := range nodes {
		if n.Name == a.o.node {
			if n.Spec.PodCIDR == "" {
				patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, a.o.podCIDR, a.o.podCIDR)
				if _, err := a.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					log.Printf("setting pod CIDR on node %s: %v", n.Name, err)
				}
			}
			continue
		}
		cidr, err1 := netip.ParsePrefix(n.Spec.PodCIDR)
		var nodeIP netip.Addr
		for _, ad := range n.Status.Addresses {
			if ad.Type == corev1.NodeInternalIP {
				nodeIP, _ = netip.ParseAddr(ad.Address)
			}
		}
		if err1 != nil || !nodeIP.IsValid() {
			continue
		}
		st.Nodes = append(st.Nodes, agent.RemoteNode{Name: n.Name, PodCIDR: cidr, NodeIP: nodeIP})
		// Without a neighbour entry the userspace tunnel drops the first
		// packet while it ARPs; the MAC is known, so seed it.
		if _, err := ovs("ovs-appctl", "tnl/arp/set", a.o.underlayBridge, nodeIP.String(), underlayMAC(nodeIP)); err != nil {
			log.Printf("%v", err)
		}
	}
	pods, _ := a.pods.List(labels.Everything())
	nss, _ := a.nss.List(labels.Everything())
	nps, _ := a.nps.List(labels.Everything())
	svcs, _ := a.svcs.List(labels.Everything())
	slices, _ := a.slices.List(labels.Everything())
	st.Policies = agent.CompilePolicies(nps, pods, nss, local)
	st.Services = agent.CompileServices(svcs, slices, a.o.podRange)
	st.GatewayRouted = agent.GatewayRouted(pods, local)
	st.DroppedReplies = agent.DroppedReplies(pods, local)
	if err := syncGatewayRoutes(a.o.underlayBridge, st); err != nil {
		return err
	}
	st.GroupIDs = map[string]int{}
	groups := map[int]bool{}
	for _, sp := range st.Services {
		id, ok := a.groupIDs[sp.Key]
		if !ok {
			a.nextID++
			id = a.nextID
			a.groupIDs[sp.Key] = id
		}
		st.GroupIDs[sp.Key] = id
		groups[id] = true
	}
	// Groups first (flows refer to them), then the flows in one bundle, then
	// the groups no flow uses any more.
	for _, g := range agent.Groups(st) {
		if _, err := ovs("ovs-ofctl", "-O", "OpenFlow15", "--may-create", "mod-group", a.o.bridge, g); err != nil {
			return err
		}
	}
	// Change only the agent's own flows, found by its cookie, in one
	// bundle, as Antrea does: flows that others installed (a trace's
	// observation flows) stay. And only the flows that changed since the
	// last sync: re-adding every flow on every pod event reset their
	// counters, and a test reads a flow's n_packets as proof that real
	// traffic took it. Where the bridge does not hold as many of the
	// agent's flows as the last sync left (ovs-vswitchd restarted, say),
	// every flow is written again.
	flows := agent.Flows(a.o.cfg, st)
	want := make(map[string]bool, len(flows))
	for _, fl := range flows {
		want[fl] = true
	}
	var lines []string
	full := !a.tookOver
	if !full {
		n, err := agentFlowCount(a.o.bridge)
		if err != nil {
			return err
		}
		full = n != len(a.applied)
	}
	switch {
	case !a.tookOver:
		// The first sync takes the bridge over: whatever an earlier agent
		// binary left (other cookies, other flows) goes.
		lines = append(lines, "delete")
	case full:
		lines = append(lines, "delete cookie="+agentCookie+"/-1")
	default:
		for fl := range a.applied {
			if !want[fl] {
				match, _, _ := strings.Cut(fl, " actions=")
				lines = append(lines, "delete_strict cookie="+agentCookie+"/-1,"+match)
			}
		}
	}
	for _, fl := range flows {
		if full || !a.applied[fl] {
			lines = append(lines, "add cookie="+agentCookie+","+fl)
		}
	}
	if len(lines) > 0 {
		file := filepath.Join(a.o.stateDir, "flows.txt")
		if err := os.WriteFile(file+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			return err
		}
		if _, err := ovs("ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", a.o.bridge, file); err != nil {
			a.applied = nil // unknown: the next sync writes every flow
			return err
		}
	}
	a.applied = want
	for id := range a.lastGroups {
		if !groups[id] {
			if _, err := ovs("ovs-ofctl", "-O", "OpenFlow15", "del-groups", a.o.bridge, "group_id="+strconv.Itoa(id)); err != nil {
				return err
			}
		}
	}
	a.lastGroups = groups
	a.tookOver = true
	a.rejecter.setState(st)
	return nil
}
