package tracer

import (
	"net/netip"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

func TestToOwnAddress(t *testing.T) {
	br := ovsNode()
	port := func(name string) *ovsdb.Port { return br.ByOfport(name) }
	// The node holds 10.244.1.1 on its gateway and nothing on the tunnel
	// or the pods' ports.
	addrs := func(name string) []netip.Addr {
		if name == "gw0" {
			return []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00::1")}
		}
		return nil
	}
	gw, other := netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("10.89.0.11")
	for name, tc := range map[string]struct {
		v     Verdict
		dst   netip.Addr
		addrs HostAddrs
		want  report.Action
	}{
		"to the gateway's own address":      {Verdict{Action: report.ActionForwardedOutOfNetwork, Port: port("gw0")}, gw, addrs, report.ActionDelivered},
		"to the gateway's IPv6 address":     {Verdict{Action: report.ActionForwardedOutOfNetwork, Port: port("gw0")}, netip.MustParseAddr("fd00::1"), addrs, report.ActionDelivered},
		"to a node IP through the gateway":  {Verdict{Action: report.ActionForwardedOutOfNetwork, Port: port("gw0")}, other, addrs, report.ActionForwardedOutOfNetwork},
		"out of a port of another bridge":   {Verdict{Action: report.ActionForwardedOutOfNetwork, PortName: "br-phy/upl0"}, gw, addrs, report.ActionForwardedOutOfNetwork},
		"into a tunnel":                     {Verdict{Action: report.ActionForwarded, Port: port("tun0")}, gw, addrs, report.ActionForwarded},
		"dropped":                           {Verdict{Action: report.ActionDropped}, gw, addrs, report.ActionDropped},
		"no destination known (a receiver)": {Verdict{Action: report.ActionForwardedOutOfNetwork, Port: port("gw0")}, netip.Addr{}, addrs, report.ActionForwardedOutOfNetwork},
		"addresses unreadable":              {Verdict{Action: report.ActionForwardedOutOfNetwork, Port: port("gw0")}, gw, nil, report.ActionForwardedOutOfNetwork},
	} {
		t.Run(name, func(t *testing.T) {
			got := ToOwnAddress(tc.v, tc.dst, tc.addrs)
			if got.Action != tc.want {
				t.Fatalf("action %s, want %s (%+v)", got.Action, tc.want, got)
			}
			if got.Port != tc.v.Port {
				t.Errorf("the port changed: %+v", got.Port)
			}
		})
	}
}
