package ofproto

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Kernel-datapath outputs from the public record (testdata/kernel/README.md
// says where each comes from), read through the seam: the ports and the fate
// the engine decides a verdict from.
func TestKernelDatapathActions(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		// dpctl marks a dpctl/dump-flows line (its actions follow
		// "actions:"), line which of the file's lines; a trace otherwise.
		dpctl bool
		line  int
		want  Fate
	}{
		"OVN into a kernel Geneve vport after conntrack": {file: "ovs-dbg-66-ovn-kernel-tunnel.txt",
			want: Fate{Outputs: []DPOutput{{Port: 4, TunnelDst: "10.0.92.172"}}}},
		"OVN's metered controller action in a sample, kernel upcall pid": {file: "ovnk-4198-kind-controller-meter.txt",
			want: Fate{Controller: true}},
		"set(tunnel) then the vport, then other ports": {file: "ovs-issues-248-dpctl-tunnel.txt", dpctl: true,
			want: Fate{Outputs: []DPOutput{
				{Port: 3, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
				{Port: 36, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
				{Port: 12, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
				{Port: 33, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
				{Port: 21, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
				{Port: 7, TunnelDst: "192.168.4.12", TunnelSrc: "192.168.4.13"},
			}}},
		"received from the kernel vport, decapsulated already": {file: "ovs-issues-248-dpctl-tunnel.txt", dpctl: true, line: 1,
			want: Fate{Outputs: []DPOutput{{Port: 11}}}},
		"psample, then the slow path remark": {file: "ovs-system-traffic-psample-slow.txt",
			want: Fate{Outputs: []DPOutput{{Port: 3}}}},
		"psample in a sample": {file: "ovs-system-traffic-psample-probability.txt",
			want: Fate{Outputs: []DPOutput{{Port: 3}}}},
		"kernel-style tunnel, remote_ip": {file: "ovs-tunnel-at-remote-ip.txt",
			want: Fate{Outputs: []DPOutput{{Port: 1, TunnelDst: "1.1.1.1"}}}},
		"kernel-style tunnel, local_ip and remote_ip": {file: "ovs-tunnel-at-local-remote-ip.txt",
			want: Fate{Outputs: []DPOutput{{Port: 1, TunnelDst: "1.1.1.1", TunnelSrc: "2.2.2.2"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			text := load(t, filepath.Join("kernel", tc.file))
			var actions string
			if tc.dpctl {
				line := strings.Split(text, "\n")[tc.line]
				_, actions, _ = strings.Cut(line, " actions:")
			} else {
				tr := Parse(text, "br-int")
				if tr.TunnelDst != "" {
					t.Errorf("Trace.TunnelDst %q: only a native (netdev) tunnel's remark names it", tr.TunnelDst)
				}
				actions = tr.DatapathActions
			}
			got := ParseDatapathActions(actions)
			tc.want.Raw = actions
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if got.Dropped() {
				t.Errorf("read as a drop: %q", actions)
			}
		})
	}
}

// The last pass of a trace is the one whose datapath actions count: a
// Megaflow line naming recirc_id is no recirculation.
func TestKernelTraceLastLines(t *testing.T) {
	tr := Parse(load(t, "kernel/ovnk-4198-kind-controller-meter.txt"), "breth0")
	if !strings.HasPrefix(tr.DatapathActions, "set(eth(src=0a:58:64:40:00:03") || tr.Passes != 1 || len(tr.Hops) != 0 {
		t.Errorf("datapath actions %q, passes %d, hops %d", tr.DatapathActions, tr.Passes, len(tr.Hops))
	}
	if f := ParseDatapathActions(tr.DatapathActions); f.Recirc {
		t.Errorf("%+v", f)
	}
	tr = Parse(load(t, "kernel/ovs-system-traffic-psample-slow.txt"), "br0")
	if tr.DatapathActions != "psample(group=10,cookie=0xaa102030aa405060),trunc(200),3" {
		t.Errorf("the slow path remark must not join the actions: %q", tr.DatapathActions)
	}
}

// kernelStyle is OVS's tunnel.at dpif/show: tail -n +3 cut the datapath's
// and the bridge's header lines, which are put back here.
func kernelStyle(t *testing.T, file string) DatapathPorts {
	t.Helper()
	return ParseDpifShow("dummy@ovs-dummy: hit:0 missed:0\n  br0:\n" + load(t, filepath.Join("kernel", file)))
}

// Tunnel ports that share a datapath port, as the kernel's do: the tunnel
// metadata the actions set before the output says which one it is.
func TestSharedTunnelPorts(t *testing.T) {
	for name, tc := range map[string]struct {
		dpif, actions string
		want          string
	}{
		"remote_ip":                {"ovs-tunnel-at-dpif-show.txt", "ovs-tunnel-at-remote-ip.txt", "p1"},
		"local_ip and remote_ip":   {"ovs-tunnel-at-dpif-show.txt", "ovs-tunnel-at-local-remote-ip.txt", "p2"},
		"reconfigured local_ip":    {"ovs-tunnel-at-dpif-show-reconfigured.txt", "ovs-tunnel-at-reconfigured.txt", "p2"},
		"an output to no tunnel":   {"ovs-tunnel-at-dpif-show.txt", "", "br0"},
		"a destination none names": {"ovs-tunnel-at-dpif-show.txt", "", "p1"},
	} {
		t.Run(name, func(t *testing.T) {
			ports := kernelStyle(t, tc.dpif)
			if len(ports) != 4 {
				t.Fatalf("%d ports: %+v", len(ports), ports)
			}
			var o DPOutput
			switch {
			case tc.actions != "":
				fate := ParseDatapathActions(Parse(load(t, filepath.Join("kernel", tc.actions)), "br0").DatapathActions)
				if len(fate.Outputs) != 1 {
					t.Fatalf("outputs %+v", fate.Outputs)
				}
				o = fate.Outputs[0]
			case tc.want == "br0":
				o = DPOutput{Port: 100, TunnelDst: "1.1.1.1"}
			default:
				o = DPOutput{Port: 1, TunnelDst: "192.0.2.1"}
			}
			p, ok := ports.Output("br0", o)
			if !ok || p.Name != tc.want {
				t.Errorf("output %+v left by %+v, want %s", o, p, tc.want)
			}
		})
	}
	if c := kernelStyle(t, "ovs-tunnel-at-dpif-show-reconfigured.txt")[2].Config(); c["local_ip"] != "2.2.2.3" || c["ttl"] != "1" || c["remote_ip"] != "1.1.1.1" {
		t.Errorf("p2's config %v", c)
	}
}

// On the userspace datapath every port has a number of its own, so Output
// is Lookup for every port of every recorded dpif/show.
func TestOutputIsLookupOnNetdev(t *testing.T) {
	files, _ := filepath.Glob("testdata/dpif-show-*.txt")
	if len(files) == 0 {
		t.Fatal("no recorded dpif/show")
	}
	for _, f := range files {
		ports := ParseDpifShow(load(t, filepath.Base(f)))
		for _, p := range ports {
			if p.Kind() != KindNetdev {
				t.Errorf("%s: %s is on %s", f, p.Name, p.Datapath)
			}
			for _, dst := range []string{"", "172.31.88.2", "192.0.2.1"} {
				want, _ := ports.Lookup("br-int", p.DPPort)
				got, ok := ports.Output("br-int", DPOutput{Port: p.DPPort, TunnelDst: dst})
				if !ok || got != want {
					t.Errorf("%s: port %d to %q: Output %+v, Lookup %+v", f, p.DPPort, dst, got, want)
				}
			}
		}
	}
}

func TestKindOf(t *testing.T) {
	for in, want := range map[string]DatapathKind{
		"system@ovs-system": KindSystem, "netdev@ovs-netdev": KindNetdev, "dummy@ovs-dummy": KindOther,
		"": KindSystem, "system": KindSystem, "netdev": KindNetdev,
	} {
		if got := KindOf(in); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", in, got, want)
		}
	}
}
