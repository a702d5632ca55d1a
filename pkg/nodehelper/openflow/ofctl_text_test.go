package openflow

import (
	"encoding/hex"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

// TestIntegrationFlowsAsOfctlText decodes every message the helper sends
// with `ovs-ofctl ofp-print`, OVS's own decoder (no daemon needed), and
// compares the text: the encoding is checked by OVS, not by us.
func TestIntegrationFlowsAsOfctlText(t *testing.T) {
	testenv.RequireCommands(t, "ovs-ofctl")
	ctl, err := ControllerAction(4660, []byte{1, 2, 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	pause, err := ControllerAction(7, []byte{9}, true)
	if err != nil {
		t.Fatal(err)
	}
	orig := FlowDesc{TableID: 10, Priority: 200, Cookie: 5,
		Match:        append(InPortField(3), EthTypeField(0x800)...),
		Instructions: append(applyActions(ResubmitAction(12)), gotoTable(20)...)}
	catch := append(append(InPortField(100), EthTypeField(0x86dd)...), DSCPField(33)...)
	mustMsg := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, tc := range map[string]struct {
		msg  []byte
		want string
	}{
		"copy of a flow": {
			CopyFlow(1, orig, CopySpec{Cookie: 0xabc, HardTimeout: 10, Priority: 201, ExtraMatch: DSCPField(5), Prepend: ctl}),
			"ADD table:10 priority=201,ip,in_port=3,nw_tos=20 cookie:0xabc hard:10 actions=controller(id=4660,userdata=01.02.03),resubmit(,12),goto_table:20",
		},
		"copy that adds an apply-actions": {
			CopyFlow(2, FlowDesc{TableID: 1, Priority: 0, Instructions: gotoTable(5)}, CopySpec{Cookie: 1, HardTimeout: 3, Priority: 1,
				ExtraMatch: append(EthTypeField(0x86dd), DSCPField(63)...), Prepend: ctl}),
			"ADD table:1 priority=1,ipv6,nw_tos=252 cookie:0x1 hard:3 actions=controller(id=4660,userdata=01.02.03),goto_table:5",
		},
		"receiver catch flow": {
			NewFlow(3, 0, 0xffff, 0x7466000000000001, 10, catch, append(pause, ResubmitAction(0)...)),
			"ADD priority=65535,ipv6,in_port=100,nw_tos=132 cookie:0x7466000000000001 hard:10 actions=controller(id=7,userdata=09,pause),resubmit(,0)",
		},
		"copy of the answer leaving the node's stack": {
			NewFlow(14, 0, 0xffff, 0x7466000000000000, 10, append(append(InPortField(0xfffffffe), EthTypeField(0x800)...), append(DSCPField(9), XReg7BitClearField(9)...)...),
				append(append(append([]byte(nil), ctl...), SetFieldAction(XReg7BitSetField(9))...), ResubmitAction(0)...)),
			"ADD priority=65535,ip,reg15=0/0x200,in_port=LOCAL,nw_tos=36 cookie:0x7466000000000000 hard:10 actions=controller(id=4660,userdata=01.02.03),set_field:0x200/0x200->xreg7,resubmit(,0)",
		},
		"delete by cookie": {mustMsg(DeleteByCookie(4, 0x7466000000000100, 0xffffffffffffff00)),
			"DEL table:255 priority=1000 cookie:0x7466000000000100/0xffffffffffffff00 actions=drop"},
		"packet-out":    {mustMsg(PacketOut(5, 3, make([]byte, 60))), "in_port=3 actions=TABLE data_len=60"},
		"controller id": {mustMsg(SetControllerID(6, 77)), "NXT_SET_CONTROLLER_ID (OF1.5) (xid=0x6): id=77"},
		"trampoline that puts back tunnel fields": {NewFlow(11, 0, 0xffff, 0x7466000000000004, 10, PktMarkField(0x74661000),
			append(SetTunnelActions(Metadata{HasTunID: true, TunID: 5, TunSrc: netip.MustParseAddr("192.168.77.1"),
				TunDst: netip.MustParseAddr("192.168.77.2")}), ResubmitAction(20)...)),
			"actions=set_field:0x5->tun_id,set_field:192.168.77.1->tun_src,set_field:192.168.77.2->tun_dst,resubmit(,20)"},
		"copy of a conjunction clause under the helper's id": {
			CopyFlow(12, FlowDesc{TableID: 12, Priority: 100, Match: append(EthTypeField(0x800), oxm(classOpenFlow, 11, []byte{10, 0, 0, 1})...),
				Instructions: applyActions(ConjunctionAction(Conjunction{ID: 7, Clause: 1, NClauses: 2}))},
				CopySpec{Cookie: 0x10, HardTimeout: 10, Priority: 101, ExtraMatch: DSCPField(5),
					ReplaceActions: ConjunctionAction(Conjunction{ID: 0xf4050003, Clause: 2, NClauses: 3})}),
			"ADD table:12 priority=101,ip,nw_src=10.0.0.1,nw_tos=20 cookie:0x10 hard:10 actions=conjunction(4093968387,2/3)",
		},
		"copy of a conjunctive flow under the helper's id": {
			CopyFlow(13, FlowDesc{TableID: 12, Priority: 100, Match: mustMsg(WithConjID(append(ConjIDField(7), EthTypeField(0x800)...), 0xf4050003)),
				Instructions: applyActions(ResubmitAction(13))},
				CopySpec{Cookie: 0x10, HardTimeout: 10, Priority: 101, ExtraMatch: DSCPField(5), Prepend: ctl}),
			"ADD table:12 priority=101,conj_id=4093968387,ip,nw_tos=20 cookie:0x10 hard:10 actions=controller(id=4660,userdata=01.02.03),resubmit(,13)",
		},
		"packet-in format": {mustMsg(SetPacketInFormat(7)), "format=nxt_packet_in2"},
		"miss_send_len":    {mustMsg(SetConfig(8)), "miss_send_len=65535"},
		"table features":   {TableFeaturesRequest(9), "OFPST_TABLE_FEATURES request (OF1.5)"},
		"table stats":      {TableStatsRequest(12), "OFPST_TABLE request (OF1.5) (xid=0xc)"},
		"flow desc":        {FlowDescRequest(10, 7, 0, 0), "OFPST_FLOW request (OF1.5) (xid=0xa): table=7"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command("ovs-ofctl", "ofp-print", hex.EncodeToString(tc.msg)).CombinedOutput()
			if err != nil {
				t.Fatalf("ofp-print: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("ovs-ofctl ofp-print says\n%s\nwant it to contain\n%s", out, tc.want)
			}
		})
	}
}

func gotoTable(t uint8) []byte { return []byte{0, 1, 0, 8, t, 0, 0, 0} }
