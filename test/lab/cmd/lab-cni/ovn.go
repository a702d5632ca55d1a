package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
)

// podNetworksAnnotation is where OVN-Kubernetes' controller writes a pod's
// address, MAC and gateway, and where its CNI reads them.
const podNetworksAnnotation = "k8s.ovn.org/pod-networks"

// ovnConf is the OVN mode's part of the netconf: how to reach the API server
// (with the node's own credentials: the Node authorizer lets a node read the
// pods bound to it), how long to wait, and the log to point at when waiting
// fails.
type ovnConf struct {
	APIServer string `json:"apiServer"`
	CAFile    string `json:"caFile"`
	CertFile  string `json:"certFile"`
	KeyFile   string `json:"keyFile"`
	// Seconds to wait for the annotation and then for ovn-installed (20 each
	// when zero).
	AnnotationTimeout int `json:"annotationTimeout"`
	InstallTimeout    int `json:"installTimeout"`
	// ControllerLog names the lab controller's log in errors.
	ControllerLog string `json:"controllerLog"`
}

// podNetwork is a pod's place on the default network as the annotation gives it.
type podNetwork struct {
	Addr    netip.Prefix // 10.244.1.5/24
	MAC     net.HardwareAddr
	Gateway netip.Addr
}

// parsePodNetworks reads the "default" network of a k8s.ovn.org/pod-networks
// annotation. OVN-Kubernetes writes both the list fields (ip_addresses,
// gateway_ips) and the older single ones (ip_address, gateway_ip); the lists
// win when both are there.
func parsePodNetworks(s string) (podNetwork, error) {
	var nets map[string]struct {
		IPAddresses []string `json:"ip_addresses"`
		MACAddress  string   `json:"mac_address"`
		GatewayIPs  []string `json:"gateway_ips"`
		IPAddress   string   `json:"ip_address"`
		GatewayIP   string   `json:"gateway_ip"`
	}
	var pn podNetwork
	if err := json.Unmarshal([]byte(s), &nets); err != nil {
		return pn, fmt.Errorf("%s: %w", podNetworksAnnotation, err)
	}
	d, ok := nets["default"]
	if !ok {
		return pn, fmt.Errorf("%s has no \"default\" network", podNetworksAnnotation)
	}
	ip, gw := d.IPAddress, d.GatewayIP
	if len(d.IPAddresses) > 0 {
		ip = d.IPAddresses[0]
	}
	if len(d.GatewayIPs) > 0 {
		gw = d.GatewayIPs[0]
	}
	var err error
	if pn.Addr, err = netip.ParsePrefix(ip); err != nil || !pn.Addr.Addr().Is4() {
		return pn, fmt.Errorf("%s: IPv4 address %q: %w", podNetworksAnnotation, ip, errOr(err, "not IPv4"))
	}
	if pn.Gateway, err = netip.ParseAddr(gw); err != nil || !pn.Gateway.Is4() {
		return pn, fmt.Errorf("%s: IPv4 gateway %q: %w", podNetworksAnnotation, gw, errOr(err, "not IPv4"))
	}
	if pn.MAC, err = net.ParseMAC(d.MACAddress); err != nil || len(pn.MAC) != 6 {
		return pn, fmt.Errorf("%s: MAC %q: %w", podNetworksAnnotation, d.MACAddress, errOr(err, "not an Ethernet MAC"))
	}
	return pn, nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// podMeta is what the CNI needs of the Pod object.
type podMeta struct {
	Metadata struct {
		UID         string            `json:"uid"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func (o ovnConf) client() (*http.Client, error) {
	ca, err := os.ReadFile(o.CAFile) //nolint:gosec // a path from the netconf the lab wrote
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", o.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

func getPod(ctx context.Context, hc *http.Client, api, ns, name string) (podMeta, error) {
	var p podMeta
	u := strings.TrimSuffix(api, "/") + "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return p, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return p, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return p, json.Unmarshal(b, &p)
}

// waitPodNetwork polls the API server until the pod (this very pod: same UID
// when the runtime passed one) carries its annotation. OVN-Kubernetes' CNI
// waits the same way: the controller allocates, the node only plumbs.
func waitPodNetwork(o ovnConf, e env) (podNetwork, string, error) {
	hc, err := o.client()
	if err != nil {
		return podNetwork{}, "", fmt.Errorf("API client from the netconf: %w", err)
	}
	timeout := seconds(o.AnnotationTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		p, err := getPod(ctx, hc, o.APIServer, e.podNamespace, e.podName)
		switch {
		case err != nil:
			last = err
		case e.podUID != "" && p.Metadata.UID != e.podUID:
			last = fmt.Errorf("the API server has pod UID %s, the runtime %s", p.Metadata.UID, e.podUID)
		case p.Metadata.Annotations[podNetworksAnnotation] == "":
			last = errors.New("no annotation yet")
		default:
			pn, err := parsePodNetworks(p.Metadata.Annotations[podNetworksAnnotation])
			return pn, p.Metadata.UID, err
		}
		select {
		case <-ctx.Done():
			return podNetwork{}, "", fmt.Errorf("pod %s/%s got no %s annotation within %s: the lab's OVN controller writes it; see %s (last: %w)",
				e.podNamespace, e.podName, podNetworksAnnotation, timeout, o.logHint(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (o ovnConf) logHint() string {
	if o.ControllerLog != "" {
		return o.ControllerLog
	}
	return "lab-ovnkube's log"
}

func seconds(n int) time.Duration {
	if n <= 0 {
		n = 20
	}
	return time.Duration(n) * time.Second
}

// ovnInterfaceIDs are the Interface external_ids through which ovn-controller
// binds the OVS port to the logical switch port NAMESPACE_POD, as
// OVN-Kubernetes' CNI writes them.
func ovnInterfaceIDs(e env, uid string, pn podNetwork) []string {
	return []string{
		fmt.Sprintf("external_ids:iface-id=%q", e.podNamespace+"_"+e.podName),
		fmt.Sprintf("external_ids:iface-id-ver=%q", uid),
		fmt.Sprintf("external_ids:attached_mac=%q", pn.MAC.String()),
		fmt.Sprintf("external_ids:ip_addresses=%q", pn.Addr.String()),
		fmt.Sprintf("external_ids:sandbox=%q", e.containerID),
	}
}

func addOVN(c netConf, e env) error {
	if !strings.HasPrefix(e.netns, "/var/run/netns/") && !strings.HasPrefix(e.netns, "/run/netns/") {
		return fmt.Errorf("netns %s is not under /var/run/netns", e.netns)
	}
	pn, uid, err := waitPodNetwork(c.OVN, e)
	if err != nil {
		return err
	}
	host := hostIfName(e)
	addr := pn.Addr.String()
	mac, err := attachVeth(c, e, host, addr, pn.MAC.String(), pn.Gateway.String())
	if err != nil {
		return err
	}
	args := append([]string{"--may-exist", "add-port", c.Bridge, host, "--", "set", "Interface", host}, ovnInterfaceIDs(e, uid, pn)...)
	if _, err := run("ovs-vsctl", args...); err != nil {
		return err
	}
	if err := waitOfport(host); err != nil {
		return err
	}
	// As OVN-Kubernetes does: the pod's network is ready only once
	// ovn-controller has installed the port's flows and said so.
	timeout := seconds(c.OVN.InstallTimeout)
	if out, err := run("ovs-vsctl", fmt.Sprintf("--timeout=%d", int(timeout.Seconds())), "wait-until", "Interface", host,
		`external_ids:ovn-installed="true"`); err != nil {
		return fmt.Errorf("ovn-controller did not mark port %s (%s_%s) ovn-installed within %s: is the logical switch port there and bound to this chassis (ovn-sbctl show)? %w %s",
			host, e.podNamespace, e.podName, timeout, err, strings.TrimSpace(out))
	}
	return json.NewEncoder(os.Stdout).Encode(result(c, e, host, mac, addr, pn.Gateway.String()))
}

func delOVN(c netConf, e env) error {
	host := hostIfName(e)
	if _, err := run("ovs-vsctl", "--if-exists", "del-port", c.Bridge, host); err != nil {
		return err
	}
	_, _ = run("ip", "link", "del", host)
	return nil
}
