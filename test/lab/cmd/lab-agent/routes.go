package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/agent"
)

// routeProto tags the kernel routes this agent owns ("t"), so a resync
// replaces exactly those and leaves the node's own routes alone.
const routeProto = "116"

// syncGatewayRoutes makes the node's kernel route each gateway-routed pod
// (agent.RouteAnnotation) to the node that owns it over the underlay: OVS
// hands such packets to the host through antrea-gw0, and without a /32 the
// host would send them straight back into antrea-gw0 (its route for the
// whole pod range). The owning node forwards what arrives on the underlay
// into its own antrea-gw0; both need forwarding on, which a fresh network
// namespace leaves off.
func syncGatewayRoutes(underlay string, st agent.State) error {
	want := map[string]string{}
	for _, a := range st.GatewayRouted {
		for _, n := range st.Nodes {
			if n.PodCIDR.Contains(a) {
				want[a.String()] = n.NodeIP.String()
			}
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil { //nolint:gosec // a sysctl, in the node's own network namespace
		return fmt.Errorf("enabling forwarding: %w", err)
	}
	out, err := ovs("ip", "-4", "route", "show", "proto", routeProto)
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == "via" {
			have[f[0]] = f[2]
		}
	}
	for dst, via := range have {
		if want[dst] != via {
			if _, err := ovs("ip", "route", "del", dst, "proto", routeProto); err != nil {
				return err
			}
		}
	}
	for dst, via := range want {
		if have[dst] != via {
			if _, err := ovs("ip", "route", "replace", dst+"/32", "via", via, "dev", underlay, "proto", routeProto); err != nil {
				return err
			}
		}
	}
	return nil
}
