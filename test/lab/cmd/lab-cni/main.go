// Command lab-cni is the lab's CNI plugin (spec 0.4.0). Its netconf's "mode"
// chooses how a pod is attached to the node's OVS bridge br-int:
//
//   - "lab" (the default): a veth pair tagged as Antrea does (pod-name and
//     pod-namespace in Port external_ids) and as OVN-Kubernetes does
//     (iface-id NAMESPACE_POD on the Interface), so that the traceflow
//     helper's port lookup is exercised both ways. IPAM hands out addresses
//     from the node's pod CIDR (one file per address). ADD returns only after
//     the lab agent has programmed the pod's flows.
//   - "ovn": as OVN-Kubernetes' CNI does (ovn.go): the address and MAC come
//     from the pod's k8s.ovn.org/pod-networks annotation, which the lab's OVN
//     controller writes, and ADD returns only once ovn-controller has marked
//     the Interface ovn-installed.
//
// One binary with two modes rather than a sibling: both share the veth
// plumbing whose pitfalls (checksum offload, routes instead of a default
// route, add-port's exit status) were each found the hard way.
//
// It uses only the standard library and the node's ip, ethtool and ovs-vsctl,
// which run in the node's namespaces because containerd does.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type netConf struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	Mode       string   `json:"mode"` // "lab" (or empty) or "ovn"
	Bridge     string   `json:"bridge"`
	Routes     []string `json:"routes"`
	MTU        int      `json:"mtu"`
	// Lab mode: IPAM and the agent.
	Subnet      string `json:"subnet"`
	Gateway     string `json:"gateway"`
	AgentSocket string `json:"agentSocket"`
	DataDir     string `json:"dataDir"`
	// OVN mode: where to read the pod's annotation, and what to name in
	// errors when it does not come.
	OVN ovnConf `json:"ovn"`
}

type env struct {
	cmd, containerID, netns, ifname string
	podName, podNamespace, podUID   string
}

func main() {
	e := env{
		cmd: os.Getenv("CNI_COMMAND"), containerID: os.Getenv("CNI_CONTAINERID"),
		netns: os.Getenv("CNI_NETNS"), ifname: os.Getenv("CNI_IFNAME"),
	}
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAME":
			e.podName = v
		case "K8S_POD_NAMESPACE":
			e.podNamespace = v
		case "K8S_POD_UID":
			e.podUID = v
		}
	}
	if e.cmd == "VERSION" {
		fmt.Println(`{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}`)
		return
	}
	raw, err := io.ReadAll(os.Stdin)
	var conf netConf
	if err == nil {
		err = json.Unmarshal(raw, &conf)
	}
	if err == nil {
		switch {
		case conf.Mode != "" && conf.Mode != "lab" && conf.Mode != "ovn":
			err = fmt.Errorf("netconf mode %q: want lab or ovn", conf.Mode)
		case e.cmd == "ADD" && conf.Mode == "ovn":
			err = addOVN(conf, e)
		case e.cmd == "ADD":
			err = add(conf, e)
		case e.cmd == "DEL" && conf.Mode == "ovn":
			err = delOVN(conf, e)
		case e.cmd == "DEL":
			err = del(conf, e)
		case e.cmd == "CHECK":
		default:
			err = fmt.Errorf("unsupported CNI_COMMAND %q", e.cmd)
		}
	}
	if err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "0.4.0", "code": 100, "msg": err.Error()})
		os.Exit(1)
	}
}

// hostIfName is derived from the pod name and the sandbox id so that DEL
// finds the same name without state: at most 15 bytes, Antrea-like.
func hostIfName(e env) string {
	h := sha256.Sum256([]byte(e.containerID))
	p := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, e.podName)
	if len(p) > 8 {
		p = p[:8]
	}
	return p + "-" + hex.EncodeToString(h[:])[:6]
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput() //nolint:gosec // ip, ethtool, ovs-vsctl, nsenter with arguments built here
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func inNetns(ns string, name string, args ...string) (string, error) {
	return run("nsenter", append([]string{"--net=" + ns, "--", name}, args...)...)
}

func add(c netConf, e env) error {
	if !strings.HasPrefix(e.netns, "/var/run/netns/") && !strings.HasPrefix(e.netns, "/run/netns/") {
		return fmt.Errorf("netns %s is not under /var/run/netns", e.netns)
	}
	prefix, err := netip.ParsePrefix(c.Subnet)
	if err != nil {
		return err
	}
	ip, err := allocate(c, e.containerID, prefix)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("%s/%d", ip, prefix.Bits())
	host := hostIfName(e)
	mac, err := attachVeth(c, e, host, addr, "", c.Gateway)
	if err != nil {
		return err
	}
	ids := fmt.Sprintf("external_ids:pod-name=%q external_ids:pod-namespace=%q external_ids:container-id=%q external_ids:ip-address=%q external_ids:attached-mac=%q external_ids:antrea-type=container",
		e.podName, e.podNamespace, e.containerID, ip.String(), mac)
	args := []string{"--may-exist", "add-port", c.Bridge, host, "--", "set", "Port", host}
	args = append(args, strings.Fields(ids)...)
	args = append(args, "--", "set", "Interface", host, fmt.Sprintf("external_ids:iface-id=%q", e.podNamespace+"_"+e.podName))
	args = append(args, strings.Fields(ids)...)
	if _, err := run("ovs-vsctl", args...); err != nil {
		return err
	}
	// add-port exits 0 even when the port could not be opened: check ofport.
	if err := waitOfport(host); err != nil {
		return err
	}
	if err := notifyAgent(c.AgentSocket, 15*time.Second); err != nil {
		return fmt.Errorf("lab agent did not program the pod's flows: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(result(c, e, host, mac, addr, c.Gateway))
}

// result is the CNI 0.4.0 ADD result: both ends, the pod's address and its
// routes.
func result(c netConf, e env, host, mac, addr, gw string) map[string]any {
	res := map[string]any{
		"cniVersion": c.CNIVersion,
		"interfaces": []map[string]any{{"name": host, "mac": ""}, {"name": e.ifname, "mac": mac, "sandbox": e.netns}},
		"ips":        []map[string]any{{"version": "4", "interface": 1, "address": addr, "gateway": gw}},
		"dns":        map[string]any{},
	}
	var routes []map[string]string
	for _, r := range c.Routes {
		routes = append(routes, map[string]string{"dst": r, "gw": gw})
	}
	res["routes"] = routes
	return res
}

// attachVeth makes the veth pair of a pod: the pod end named e.ifname in the
// pod's network namespace with addr (and mac, when not empty), routes for
// c.Routes via gw, the host end named host, both with TX checksum offload
// off, both up. It returns the pod end's MAC.
func attachVeth(c netConf, e env, host, addr, mac, gw string) (string, error) {
	peer := "tfp" + host[strings.LastIndex(host, "-")+1:]
	_, _ = run("ip", "link", "del", host)
	mtu := fmt.Sprint(c.MTU)
	if _, err := run("ip", "link", "add", host, "mtu", mtu, "type", "veth", "peer", "name", peer, "mtu", mtu); err != nil {
		return "", err
	}
	if _, err := run("ip", "link", "set", peer, "netns", filepath.Base(e.netns)); err != nil {
		return "", err
	}
	steps := [][]string{{"ip", "link", "set", peer, "name", e.ifname}}
	if mac != "" {
		steps = append(steps, []string{"ip", "link", "set", e.ifname, "address", mac})
	}
	steps = append(steps,
		[]string{"ip", "addr", "add", addr, "dev", e.ifname},
		[]string{"ip", "link", "set", e.ifname, "up"},
		// Without this, TCP fails while ping works: OVS's userspace datapath
		// forwards the veth's partial checksums as they are.
		[]string{"ethtool", "-K", e.ifname, "tx", "off"},
	)
	for _, r := range c.Routes {
		// Routes for the pod and service ranges only, no default route: name
		// lookups would otherwise go into OVS and hang.
		steps = append(steps, []string{"ip", "route", "add", r, "via", gw, "dev", e.ifname})
	}
	for _, s := range steps {
		if _, err := inNetns(e.netns, s[0], s[1:]...); err != nil {
			return "", err
		}
	}
	// Not /sys/class/net: sysfs there shows the node's devices, not the pod's.
	out, err := inNetns(e.netns, "ip", "-o", "link", "show", e.ifname)
	if err != nil {
		return "", err
	}
	if i := strings.Index(out, "link/ether "); i >= 0 {
		out = strings.Fields(out[i+len("link/ether "):])[0]
	}
	got := strings.TrimSpace(out)
	if _, err := net.ParseMAC(got); err != nil {
		return "", fmt.Errorf("pod mac %q: %w", got, err)
	}
	if _, err := run("ethtool", "-K", host, "tx", "off"); err != nil {
		return "", err
	}
	if _, err := run("ip", "link", "set", host, "up"); err != nil {
		return "", err
	}
	return got, nil
}

func waitOfport(port string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := run("ovs-vsctl", "get", "Interface", port, "ofport")
		v := strings.TrimSpace(out)
		if err == nil && v != "" && v != "[]" && v != "-1" && v != "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %s has no OpenFlow port number (ofport %q): see ovs-vswitchd.log", port, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func notifyAgent(sock string, timeout time.Duration) error {
	c, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "sync\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "ok" {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

func del(c netConf, e env) error {
	host := hostIfName(e)
	if _, err := run("ovs-vsctl", "--if-exists", "del-port", c.Bridge, host); err != nil {
		return err
	}
	_, _ = run("ip", "link", "del", host)
	if err := release(c, e.containerID); err != nil {
		return err
	}
	_ = notifyAgent(c.AgentSocket, 2*time.Second)
	return nil
}

func lock(c netConf) (*os.File, error) {
	if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.DataDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// allocate returns the address this container already holds, or the first
// free one after the gateway.
func allocate(c netConf, id string, prefix netip.Prefix) (netip.Addr, error) {
	l, err := lock(c)
	if err != nil {
		return netip.Addr{}, err
	}
	defer func() { _ = l.Close() }()
	gw, _ := netip.ParseAddr(c.Gateway)
	entries, _ := os.ReadDir(c.DataDir)
	for _, en := range entries {
		b, _ := os.ReadFile(filepath.Join(c.DataDir, en.Name())) //nolint:gosec // an entry of the plugin's own data dir
		if string(b) == id {
			return netip.ParseAddr(en.Name())
		}
	}
	for a := prefix.Masked().Addr().Next(); prefix.Contains(a); a = a.Next() {
		if a == gw || !prefix.Contains(a.Next()) { // skip the gateway and broadcast
			continue
		}
		p := filepath.Join(c.DataDir, a.String())
		if _, err := os.Stat(p); err == nil {
			continue
		}
		return a, os.WriteFile(p, []byte(id), 0o600)
	}
	return netip.Addr{}, fmt.Errorf("no free address in %s", prefix)
}

func release(c netConf, id string) error {
	l, err := lock(c)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }()
	entries, _ := os.ReadDir(c.DataDir)
	for _, en := range entries {
		p := filepath.Join(c.DataDir, en.Name())
		if b, _ := os.ReadFile(p); en.Name() != "lock" && string(b) == id { //nolint:gosec // p is an entry of the plugin's own data dir
			return os.Remove(p)
		}
	}
	return nil
}
