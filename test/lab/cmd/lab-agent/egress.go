package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// gatewayIface is the node's own port into br-int, as lab-up names it.
const gatewayIface = "antrea-gw0"

// parseOutside reads -outside: comma-separated prefixes, or none.
func parseOutside(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("-outside: %w", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ensureMasquerade makes the node's kernel masquerade what its pods send
// out of the cluster, as Antrea's agent does in its ANTREA-POSTROUTING
// chain: from the pod range, to anything else, not back into antrea-gw0.
// The answers come back to the node's address; the kernel un-NATs them
// and routes them into antrea-gw0. The rule lives in the node's network
// namespace, which lab-down removes with it.
func ensureMasquerade(podRange netip.Prefix) error {
	rule := []string{"POSTROUTING", "-s", podRange.String(), "!", "-d", podRange.String(), "!", "-o", gatewayIface,
		"-m", "comment", "--comment", "lab-agent: pods to outside the cluster", "-j", "MASQUERADE"}
	if _, err := ovs("iptables", append([]string{"-w", "-t", "nat", "-C"}, rule...)...); err == nil {
		return nil
	}
	if _, err := ovs("iptables", append([]string{"-w", "-t", "nat", "-A"}, rule...)...); err != nil {
		return fmt.Errorf("masquerade the pods' egress: %w", err)
	}
	return nil
}
