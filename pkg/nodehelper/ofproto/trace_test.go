package ofproto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func load(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTunnelAfterConntrack(t *testing.T) {
	tr := Parse(load(t, "tunnel-after-ct.txt"), "br-int")
	type hop struct {
		Table    uint8
		Match    string
		Priority uint16
		Cookie   uint64
		Pass     int
	}
	var got []hop
	for _, h := range tr.Hops {
		got = append(got, hop{h.Table, h.Match, h.Priority, h.Cookie, h.Pass})
	}
	want := []hop{
		{0, "in_port=1", 190, 0x1000, 0},
		{1, "ip,in_port=1,dl_src=02:00:0a:0a:01:02,nw_src=10.10.1.2", 200, 0x1001, 0},
		{5, "ip", 200, 0x1002, 0},
		{6, "", 0, 0x1002, 1},
		{8, "", 0, 0x1003, 1},
		{10, "ip,nw_dst=10.10.2.0/24", 200, 0x1004, 1},
		{12, "", 0, 0x1005, 1},
		{13, "", 0, 0x1005, 1},
		{20, "", 200, 0x1006, 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("hops (-want +got), br-phy's hop must be left out:\n%s", d)
	}
	last := tr.Hops[len(tr.Hops)-1]
	if d := cmp.Diff([]string{"100"}, last.Outputs()); d != "" {
		t.Errorf("outputs of the last hop: %s", d)
	}
	if tr.TunnelDst != "192.168.77.2" || tr.Dropped() || last.Drops() {
		t.Errorf("tunnel dst %q, dropped %v", tr.TunnelDst, tr.Dropped())
	}
}

func TestParseNoMatch(t *testing.T) {
	tr := Parse(load(t, "no-match.txt"), "br-int")
	if len(tr.Hops) != 3 {
		t.Fatalf("hops %+v", tr.Hops)
	}
	h := tr.Hops[2]
	if !h.NoMatch || h.Table != 10 || !h.Drops() || !tr.Dropped() {
		t.Errorf("last hop %+v, dropped %v", h, tr.Dropped())
	}
}

type hopShape struct {
	Table   uint8
	Depth   int
	NoMatch bool
	Pass    int
}

func shapes(hs []Hop) []hopShape {
	var out []hopShape
	for _, h := range hs {
		out = append(out, hopShape{h.Table, h.Depth, h.NoMatch, h.Pass})
	}
	return out
}

// A subroutine's miss (table 30, called with resubmit and returned from)
// is nested and no drop; the caller's actions after it stay the caller's.
func TestParseSubroutine(t *testing.T) {
	tr := Parse(load(t, "ovs-delivered.txt"), "br-int")
	want := []hopShape{{0, 0, false, 0}, {30, 1, true, 0}, {1, 0, false, 0}, {15, 0, false, 0}, {20, 0, false, 0}}
	if d := cmp.Diff(want, shapes(tr.Hops)); d != "" {
		t.Fatalf("hops (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"set_field:0x1->reg0", "resubmit(,30)", "resubmit(,1)"}, tr.Hops[0].Actions); d != "" {
		t.Errorf("table 0's actions, around the subroutine: %s", d)
	}
	if tr.Hops[1].Drops() || !tr.Hops[1].NoMatch {
		t.Errorf("a subroutine's miss is no drop: %+v", tr.Hops[1])
	}
	if tr.Hops[0].InPort != "1" || tr.Passes != 1 || tr.DatapathActions != "5" {
		t.Errorf("in_port %q passes %d datapath %q", tr.Hops[0].InPort, tr.Passes, tr.DatapathActions)
	}
}

// OVN's path to the tunnel: tables nested in clone()s, a bridge("br-phy")
// section inside table 39's output, and table 39's next action after it.
func TestParseNestedBridgeSection(t *testing.T) {
	tr := Parse(load(t, "ovn-cross-node.txt"), "br-int")
	if tr.Passes != 2 || len(tr.Elsewhere) != 1 || tr.Elsewhere[0].Bridge != "br-phy" || tr.TunnelDst != "172.31.88.2" {
		t.Fatalf("passes %d, elsewhere %+v, tunnel %q", tr.Passes, tr.Elsewhere, tr.TunnelDst)
	}
	n := len(tr.Hops)
	last := shapes(tr.Hops[n-2:])
	if d := cmp.Diff([]hopShape{{39, 2, false, 1}, {40, 2, false, 1}}, last); d != "" {
		t.Fatalf("the hops around br-phy's section (-want +got):\n%s", d)
	}
	t39 := tr.Hops[n-2]
	if t39.Actions[len(t39.Actions)-1] != "resubmit(,40)" || t39.Bridge != "br-int" {
		t.Errorf("table 39 goes on after br-phy's section: %q", t39.Actions)
	}
	if d := cmp.Diff([]string{"1"}, t39.Outputs()); d != "" {
		t.Errorf("table 39's outputs: %s", d)
	}
	for _, h := range tr.Hops {
		if h.NoMatch && h.Depth == 0 {
			t.Errorf("OVN's subroutine misses are nested: %+v", h)
		}
	}
}

func TestParseDatapathActions(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want Fate
	}{
		"port":  {"5", Fate{Outputs: []DPOutput{{Port: 5}}}},
		"drop":  {"drop", Fate{}},
		"empty": {"", Fate{}},
		"set, then port": {"set(ipv4(dst=172.31.1.1)),set(skb_mark(0)),4",
			Fate{Outputs: []DPOutput{{Port: 4}}}},
		"native tunnel, underlay after it": {"set(eth(src=02:00:00:00:01:01)),tnl_push(tnl_port(5),header(size=50,type=5,eth(dst=02:00:c0:a8:4d:02,src=02:00:c0:a8:4d:01,dl_type=0x0800),ipv4(src=192.168.77.1,dst=192.168.77.2,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),geneve(vni=0x0)),out_port(4)),6",
			Fate{Outputs: []DPOutput{{Port: 5, TunnelDst: "192.168.77.2", Underlay: []uint32{6}}}}},
		"tunnel in a clone, then a pod": {"clone(tnl_push(tnl_port(7),header(ipv6(src=fd00::1,dst=fd00::2,label=0,proto=17,tclass=0x0,hlimit=64)),out_port(1)),2),5",
			Fate{Outputs: []DPOutput{{Port: 7, TunnelDst: "fd00::2", Underlay: []uint32{2}}, {Port: 5}}}},
		"kernel tunnel": {"set(tunnel(tun_id=0x5,dst=192.0.2.7,ttl=64,tp_dst=6081,flags(df|key))),3",
			Fate{Outputs: []DPOutput{{Port: 3, TunnelDst: "192.0.2.7"}}}},
		"dp_hash group":             {"hash(l4(0)),recirc(0x3)", Fate{Recirc: true}},
		"conntrack":                 {"ct(zone=7,nat),recirc(0x1)", Fate{Recirc: true}},
		"controller":                {"userspace(pid=0,controller(reason=1,dont_send=1,continuation=0,recirc_id=2,rule_cookie=0,controller_id=0,max_len=65535))", Fate{Controller: true}},
		"sampling is no controller": {"userspace(pid=3,sFlow(vid=0,pcp=0,output=2)),2", Fate{Outputs: []DPOutput{{Port: 2}}}},
		"small packets take le":     {"check_pkt_len(size=1414,gt(4,userspace(pid=0,controller(reason=1))),le(5))", Fate{Outputs: []DPOutput{{Port: 5}}}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ParseDatapathActions(tc.in)
			tc.want.Raw = tc.in
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if got.Dropped() != (len(tc.want.Outputs) == 0 && !tc.want.Recirc && !tc.want.Controller) {
				t.Errorf("Dropped() = %v", got.Dropped())
			}
		})
	}
}

// Every recorded trace's last datapath actions parse into something: no
// recorded fate is silently read as a drop.
func TestRecordedFates(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	ovs40, _ := filepath.Glob("testdata/ovs-4.0/*.txt")
	if len(ovs40) == 0 {
		t.Error("no traces recorded with OVS 4.0 in testdata/ovs-4.0 (see testdata/README.md)")
	}
	for _, f := range append(files, ovs40...) {
		text := load(t, strings.TrimPrefix(f, "testdata/"))
		if !strings.Contains(text, "Datapath actions:") {
			continue
		}
		tr := Parse(text, "br-int")
		fate := ParseDatapathActions(tr.DatapathActions)
		if fate.Dropped() != (tr.DatapathActions == "drop") {
			t.Errorf("%s: %q parsed as %+v", f, tr.DatapathActions, fate)
		}
	}
}

func TestParseDpifShow(t *testing.T) {
	ports := ParseDpifShow(load(t, "dpif-show-ovs.txt"))
	if len(ports) != 7 {
		t.Fatalf("%d ports: %+v", len(ports), ports)
	}
	p, ok := ports.Lookup("br-int", 7)
	want := DatapathPort{Datapath: "netdev@ovs-netdev", Bridge: "br-int", Name: "tun0", OFPort: 100, DPPort: 7, Type: "geneve: key=flow, remote_ip=flow"}
	if d := cmp.Diff(want, p); !ok || d != "" {
		t.Errorf("datapath port 7: %s", d)
	}
	if p, ok := ports.Lookup("br-int", 2); !ok || p.Bridge != "br-phy" || p.Name != "upl0" {
		t.Errorf("datapath port 2 is br-phy's: %+v", p)
	}
	if _, ok := ports.Lookup("br-int", 99); ok {
		t.Error("port 99 found")
	}
	// Two datapaths number their ports independently.
	two := ParseDpifShow("system@ovs-system: hit:0 missed:0\n  br-k:\n    br-k 65534/0: (internal)\n    eth1 1/1: (system)\n" +
		"netdev@ovs-netdev: hit:0 missed:0\n  br-int:\n    br-int 65534/1: (tap)\n    patch-x 5/none: (patch: peer=patch-y)\n")
	if p, ok := two.Lookup("br-int", 1); !ok || p.Name != "br-int" || p.OFPort != 65534 {
		t.Errorf("netdev port 1: %+v", p)
	}
	if len(two) != 3 {
		t.Errorf("patch ports have no datapath number: %+v", two)
	}
}

func TestOutputs(t *testing.T) {
	for name, tc := range map[string]struct {
		h    Hop
		want []string
	}{
		"hairpin":  {Hop{InPort: "1", Actions: []string{"IN_PORT"}}, []string{"1"}},
		"LOCAL":    {Hop{Actions: []string{"LOCAL"}}, []string{"65534"}},
		"register": {Hop{Actions: []string{"output:NXM_NX_REG1[]", "-> output port is 2"}}, []string{"2"}},
		"skipped":  {Hop{Actions: []string{"output:1", ">> skipping output to input port", "output:2"}}, []string{"2"}},
		"missing":  {Hop{Actions: []string{"output:9", ">> Nonexistent output port"}}, nil},
		"name":     {Hop{Actions: []string{`output:"pod-b"`}}, []string{"pod-b"}},
	} {
		if d := cmp.Diff(tc.want, tc.h.Outputs()); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
}

func TestParseController(t *testing.T) {
	c, ok := ParseController("controller(reason=no_match,id=27745,userdata=01.02,pause)")
	want := ControllerAction{Reason: "no_match", ID: 27745, Userdata: []byte{1, 2}, Pause: true}
	if d := cmp.Diff(want, c); !ok || d != "" {
		t.Errorf("%s", d)
	}
	if _, ok := ParseController("output:3"); ok {
		t.Error("output:3 is no controller action")
	}
}

// Recorded on the lab's ovnk mode (OVN 26.03, OVS 4.0, 2026-12-02): a pod
// to a Service whose endpoint is on the same node. The datapath actions of
// the load-balanced pass end in check_pkt_len, both of whose branches
// recirculate to the same id, and OVS's trace follows that recirculation
// twice, word for word. The packet takes it once: the path holds it once,
// and ends at its output to the endpoint.
func TestParseRecirculationFollowedTwice(t *testing.T) {
	text := load(t, "ovs-4.0/ovnk-lb-local-endpoint.txt")
	if n := strings.Count(text, "recirc(0x1b69) - resume conntrack"); n != 2 {
		t.Fatalf("the recording follows recirc 0x1b69 %d times, want 2", n)
	}
	tr := Parse(text, "br-int")
	outputs, lastPass := 0, 0
	for _, h := range tr.Hops {
		for _, a := range h.Actions {
			if a == "output:14" {
				outputs++
			}
		}
		lastPass = max(lastPass, h.Pass)
	}
	if outputs != 1 {
		t.Errorf("%d hops output to the endpoint's port, want 1", outputs)
	}
	if last := tr.Hops[len(tr.Hops)-1]; last.Table != 65 || len(last.Actions) != 1 || last.Actions[0] != "output:14" {
		t.Errorf("the path ends at table %d %v, want table 65 output:14", last.Table, last.Actions)
	}
	if tr.Passes != lastPass+1 {
		t.Errorf("%d passes, the last hop's pass %d", tr.Passes, lastPass)
	}
	if !strings.HasSuffix(tr.DatapathActions, ",9") {
		t.Errorf("datapath actions %q, want the last pass's (output to 9)", tr.DatapathActions)
	}
}
