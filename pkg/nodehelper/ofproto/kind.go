package ofproto

import (
	"strings"
)

// DatapathKind is the datapath ovs-vswitchd runs a bridge on. Everything the
// helper assumes about one datapath and not the other is answered here, in
// dpif.go (the port table) and in datapath.go (the action list); the engine
// asks those and reads no datapath text itself.
//
// What differs between the two, and how it is handled:
//
//   - Names: "netdev@ovs-netdev" (userspace, dpif-netdev) and
//     "system@ovs-system" (the kernel module, dpif-netlink) head dpif/show's
//     sections. Internal ports show as "tap" on netdev, "internal" on system.
//     KindOf reads the name; nothing else depends on the port types.
//   - Port numbers: each datapath numbers its ports itself, so a number is
//     looked up in the datapath of the traced bridge (Lookup). On netdev every
//     tunnel port is a port of its own (tnl_push(tnl_port(N))). On system all
//     tunnel ports of one type share the datapath port of one kernel vport
//     (genev_sys_6081, vxlan_sys_4789, gre_sys): dpif/show lists them with
//     the same number and only the tunnel metadata set before the output
//     says which one (Output).
//   - Entering a tunnel: netdev encapsulates itself,
//     "tnl_push(tnl_port(N),header(...ipv4(src=..,dst=..)...),out_port(M)),U"
//     with the underlay output U after it; system sets the metadata and
//     outputs to the vport, "set(tunnel(tun_id=..,src=..,dst=..,...)),N",
//     and the kernel routes the encapsulated packet. ofproto/trace remarks
//     "-> tunneling to IP via BRIDGE" and prints the underlay bridge's
//     section only for netdev ("-> output to kernel tunnel" on system), so
//     Trace.TunnelDst and Trace.Elsewhere are netdev's; the datapath actions
//     carry the destination on both (DPOutput.TunnelDst).
//   - Leaving a tunnel: netdev decapsulates on the underlay bridge with
//     tnl_pop(N), a recirculation into the tunnel port; the kernel vport
//     decapsulates before the flow lookup, so a system trace of the received
//     packet starts at the tunnel port with its tunnel metadata and has no
//     tnl_pop. Both read as Fate.Recirc.
//   - Conntrack and select groups: "ct(zone=..,nat),recirc(0x..)" and
//     "hash(l4(0)),recirc(0x..)" are the same text on both; a recirculation is
//     an open verdict on either (Fate.Recirc).
//   - Controller actions: "userspace(pid=P,controller(...))", with P 0 on
//     netdev and a netlink port id on system (4294967295 in the kernel's
//     per-CPU upcall mode). Where the pipeline meters its controller actions
//     (OVN does), the userspace action comes wrapped in
//     "sample(sample=100.0%,actions(meter(N),userspace(...)))", and a kernel
//     without the clone action writes a clone in the same form; both are read
//     as a clone (Fate.Controller, Fate.Outputs).
//   - Kernel-only actions (psample, a slow-path remark after the datapath
//     actions when the kernel lacks an action) move no packet and are
//     skipped.
//
// What stays unproven on a kernel datapath is listed in testdata/kernel/README.md.
type DatapathKind string

const (
	// KindNetdev is the userspace datapath (datapath_type=netdev).
	KindNetdev DatapathKind = "netdev"
	// KindSystem is the kernel datapath (datapath_type empty or system).
	KindSystem DatapathKind = "system"
	// KindOther is any other datapath (dummy in OVS's own tests, windows).
	KindOther DatapathKind = "other"
)

// KindOf says which kind a datapath is, from its name in dpif/show
// ("system@ovs-system") or from a bridge's datapath_type in OVSDB ("",
// "system", "netdev").
func KindOf(name string) DatapathKind {
	typ, _, _ := strings.Cut(name, "@")
	switch typ {
	case "", "system":
		return KindSystem
	case "netdev":
		return KindNetdev
	}
	return KindOther
}

// Kind is the kind of the datapath holding the port.
func (p DatapathPort) Kind() DatapathKind { return KindOf(p.Datapath) }

// Datapath is the name of the datapath holding bridge ("" where dpif/show
// did not list it).
func (d DatapathPorts) Datapath(bridge string) string {
	for _, p := range d {
		if p.Bridge == bridge {
			return p.Datapath
		}
	}
	return ""
}

// Config is the port's configuration as dpif/show prints it after the type
// ("geneve: csum=true, key=flow, remote_ip=172.31.88.2" gives csum, key and
// remote_ip), or nil where it has none.
func (p DatapathPort) Config() map[string]string {
	_, cfg, ok := strings.Cut(p.Type, ": ")
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(cfg, ", ") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// Output finds the port a datapath output leaves the traced bridge by. It is
// Lookup, except where several ports of the bridge's datapath share the
// number: on the kernel datapath all tunnel ports of one type do, and the
// tunnel metadata the actions set before the output picks one, as the
// kernel's tunnel receive does in reverse: the port whose remote_ip is the
// destination (and whose local_ip, if it has one, is the source); else one
// with remote_ip=flow; else the first listed.
func (d DatapathPorts) Output(bridge string, o DPOutput) (DatapathPort, bool) {
	dp := d.Datapath(bridge)
	var same []DatapathPort
	for _, p := range d {
		if p.DPPort == o.Port && (dp == "" || p.Datapath == dp) {
			same = append(same, p)
		}
	}
	switch {
	case len(same) == 0:
		return DatapathPort{}, false
	case len(same) == 1 || o.TunnelDst == "":
		return same[0], true
	}
	best, score := same[0], -1
	for _, p := range same {
		c := p.Config()
		s := -1
		switch c["remote_ip"] {
		case o.TunnelDst:
			s = 2
		case "flow":
			s = 0
		}
		if s < 0 {
			continue
		}
		switch l := c["local_ip"]; {
		case l == "":
		case l == o.TunnelSrc:
			s++
		case l != "flow":
			continue
		}
		if s > score {
			best, score = p, s
		}
	}
	return best, true
}
