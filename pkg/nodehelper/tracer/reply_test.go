package tracer

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

// The answer's catch flows match the probe's source address, except where
// the answer may come back to any address (a probe from outside, whose
// source the gateway router translates): then ports, identifier and type
// alone, and nothing else changes.
func TestAnswerCatch(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00::5")
	for name, tc := range map[string]struct {
		to   probe.ReplyTo
		want []string
	}{
		"TCP to the source": {to: probe.ReplyTo{Source: v4, Protocol: probe.TCP, SrcPort: 61000}, want: []string{
			"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=3",
			"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=11",
			"dl_type=0x0800,nw_proto=6,nw_dst=10.244.0.5,tp_dst=61000",
		}},
		"TCP to any address": {to: probe.ReplyTo{Source: v4, Protocol: probe.TCP, SrcPort: 61000, AnyAddress: true}, want: []string{
			"dl_type=0x0800,nw_proto=1,icmp_type=3",
			"dl_type=0x0800,nw_proto=1,icmp_type=11",
			"dl_type=0x0800,nw_proto=6,tp_dst=61000",
		}},
		"UDP to any address": {to: probe.ReplyTo{Source: v4, Protocol: probe.UDP, SrcPort: 61001, AnyAddress: true}, want: []string{
			"dl_type=0x0800,nw_proto=1,icmp_type=3",
			"dl_type=0x0800,nw_proto=1,icmp_type=11",
			"dl_type=0x0800,nw_proto=17,tp_dst=61001",
		}},
		"ping to the source": {to: probe.ReplyTo{Source: v4, Protocol: probe.ICMP, ICMPID: 7}, want: []string{
			"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=3",
			"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=11",
			"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=0",
		}},
		"IPv6 ping to any address": {to: probe.ReplyTo{Source: v6, Protocol: probe.ICMP, ICMPID: 7, AnyAddress: true}, want: []string{
			"dl_type=0x86dd,nw_proto=58,icmpv6_type=1",
			"dl_type=0x86dd,nw_proto=58,icmpv6_type=3",
			"dl_type=0x86dd,nw_proto=58,icmpv6_type=129",
		}},
		"IPv6 TCP to the source": {to: probe.ReplyTo{Source: v6, Protocol: probe.TCP, SrcPort: 61000}, want: []string{
			"dl_type=0x86dd,nw_proto=58,ipv6_dst=fd00::5,icmpv6_type=1",
			"dl_type=0x86dd,nw_proto=58,ipv6_dst=fd00::5,icmpv6_type=3",
			"dl_type=0x86dd,nw_proto=6,ipv6_dst=fd00::5,tp_dst=61000",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			s := &session{c: Common{Tag: 5, Timeout: 10 * time.Second}, ctlID: 9, cookie: TraceCookie(5, 1)}
			p, keys, err := s.answerCatch(tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != len(p.FlowMods) {
				t.Fatalf("%d catch keys for %d flows", len(keys), len(p.FlowMods))
			}
			var got []string
			for _, m := range p.FlowMods {
				fm := splitFlowMod(t, m)
				// Every catch carries its tag's (5) bit of xreg7, so that
				// another process's catch of the same answers overlaps it
				// without being the same flow (answerCatchPriority).
				match, ok := strings.CutSuffix(openflow.FormatMatch(fm.match), ",xreg7=0x0000000000000000/0x0000000000000020")
				if !ok {
					t.Errorf("flow %s: no xreg7 bit of tag 5", openflow.FormatMatch(fm.match))
				}
				got = append(got, match)
				if fm.table != 0 || fm.priority != 0xfffe || openflow.FlowModCookie(m) != s.cookie|kindCatch || openflow.FlowModHardTimeout(m) != 10 ||
					openflow.FlowModFlags(m) != openflow.FlagCheckOverlap {
					t.Errorf("flow %s: table %d priority %d cookie %#x hard_timeout %d flags %#x; want table 0, 65534, the catch's cookie, 10s, check overlap",
						match, fm.table, fm.priority, openflow.FlowModCookie(m), openflow.FlowModHardTimeout(m), openflow.FlowModFlags(m))
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("catch flows' matches (-want +got):\n%s", d)
			}
			for i, k := range keys {
				if want := matchClass(got[i]); k.class() != want {
					t.Errorf("flow %s: catch key %+v of class %q, want %q", got[i], k, k.class(), want)
				}
			}
		})
	}
}

// matchClass is the kind of answer a catch flow's match catches.
func matchClass(m string) string {
	switch {
	case strings.Contains(m, "nw_proto=6,"):
		return "TCP"
	case strings.Contains(m, "nw_proto=17,"):
		return "UDP"
	case strings.HasSuffix(m, "icmp_type=0"), strings.HasSuffix(m, "icmpv6_type=129"):
		return "echo reply"
	}
	return "ICMP error"
}
