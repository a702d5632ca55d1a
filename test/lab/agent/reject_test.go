package agent

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRejectAndGatewayFlows(t *testing.T) {
	c := netip.MustParseAddr("10.244.1.3")
	st := State{
		Pods:          []LocalPod{{IP: a, MAC: "aa:00:00:00:00:02", OFPort: 3}, {IP: c, MAC: "aa:00:00:00:00:03", OFPort: 4}},
		Nodes:         []RemoteNode{{Name: "n2", PodCIDR: netip.MustParsePrefix("10.244.2.0/24"), NodeIP: netip.MustParseAddr("10.89.0.12")}},
		Policies:      Policies{IngressIsolated: []netip.Addr{a, c}, IngressReject: []netip.Addr{a}, EgressIsolated: []netip.Addr{c}, EgressReject: []netip.Addr{c}},
		GatewayRouted: []netip.Addr{b},
	}
	got := strings.Join(Flows(cfg, st), "\n") + "\n"
	for _, want := range []string{
		fmt.Sprintf("table=%d,priority=200,ip,nw_dst=10.244.1.2 actions=set_field:0x4400000/0xfe600000->reg0,set_field:0x11/0xff->reg2,goto_table:%d", TableIngressDefaultRule, TableOutput),
		fmt.Sprintf("table=%d,priority=200,ip,nw_dst=10.244.1.3 actions=drop", TableIngressDefaultRule),
		fmt.Sprintf("table=%d,priority=200,ip,nw_src=10.244.1.3 actions=set_field:0x4400000/0xfe600000->reg0,set_field:0xb/0xff->reg2,goto_table:%d", TableEgressDefaultRule, TableOutput),
		fmt.Sprintf("table=%d,priority=220,reg0=0x4400000/0xfe600000 actions=controller(id=27745,userdata=01.02)", TableOutput),
		fmt.Sprintf("table=%d,priority=195,ip,nw_dst=10.244.2.2 actions=set_field:02:00:0a:f4:01:01->eth_dst,goto_table:%d", TableL3Forwarding, TableL3DecTTL),
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing flow\n  %s\nin\n%s", want, got)
		}
	}
}

func TestCompileRejectAnnotation(t *testing.T) {
	np := func(name string, ann map[string]string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Status: corev1.PodStatus{PodIP: "10.244.1.2", Phase: corev1.PodRunning}}
	local := map[netip.Addr]bool{a: true}
	drop := CompilePolicies([]*networkingv1.NetworkPolicy{np("d", nil)}, []*corev1.Pod{p}, nil, local)
	if len(drop.IngressIsolated) != 1 || len(drop.IngressReject) != 0 {
		t.Errorf("plain policy: %+v", drop)
	}
	rej := CompilePolicies([]*networkingv1.NetworkPolicy{np("d", nil), np("r", map[string]string{ActionAnnotation: "reject"})}, []*corev1.Pod{p}, nil, local)
	if len(rej.IngressReject) != 1 || rej.IngressReject[0] != a {
		t.Errorf("with a reject policy: %+v", rej)
	}
}

func frame(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes()
}

func TestRejectReply(t *testing.T) {
	st := State{
		Pods:  []LocalPod{{IP: a, MAC: "aa:00:00:00:00:02", OFPort: 3}},
		Nodes: []RemoteNode{{Name: "n2", PodCIDR: netip.MustParsePrefix("10.244.2.0/24"), NodeIP: netip.MustParseAddr("10.89.0.12")}},
	}
	srcMAC, _ := net.ParseMAC("aa:00:00:00:00:02")
	dstMAC, _ := net.ParseMAC(cfg.GatewayMAC)
	pkt := func(src, dst string, l4 ...gopacket.SerializableLayer) []byte {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 63, TOS: 0x10 << 2, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
		switch l := l4[0].(type) {
		case *layers.TCP:
			ip.Protocol = layers.IPProtocolTCP
			_ = l.SetNetworkLayerForChecksum(ip)
		case *layers.UDP:
			ip.Protocol = layers.IPProtocolUDP
			_ = l.SetNetworkLayerForChecksum(ip)
		default:
			ip.Protocol = layers.IPProtocolICMPv4
		}
		return frame(t, append([]gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4}, ip}, l4...)...)
	}
	echoReq := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 9, Seq: 1}
	for _, tc := range []struct {
		name    string
		in      []byte
		wantOut Injection
		check   func(t *testing.T, p gopacket.Packet)
		wantErr bool
	}{
		{"TCP SYN from a local pod gets RST+ACK on its port", pkt("10.244.1.2", "10.244.2.2", &layers.TCP{SrcPort: 40000, DstPort: 80, SYN: true, Seq: 1000}),
			Injection{OFPort: 3, podMAC: "aa:00:00:00:00:02"}, func(t *testing.T, p gopacket.Packet) {
				tcp := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if !tcp.RST || !tcp.ACK || tcp.Ack != 1001 || tcp.Seq != 0 || tcp.SrcPort != 80 || tcp.DstPort != 40000 {
					t.Errorf("RST %+v", tcp)
				}
				// To the pod's own MAC: the packet-in's source MAC is the gateway's.
				if eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); eth.DstMAC.String() != "aa:00:00:00:00:02" || eth.SrcMAC.String() != cfg.GatewayMAC {
					t.Errorf("to a local pod: %s -> %s", eth.SrcMAC, eth.DstMAC)
				}
			}, false},
		{"TCP ACK from a remote pod gets RST with its ack as seq, into the tunnel", pkt("10.244.2.5", "10.244.1.2", &layers.TCP{SrcPort: 40000, DstPort: 80, ACK: true, Seq: 5, Ack: 77}),
			Injection{OFPort: 1, TunDst: netip.MustParseAddr("10.89.0.12")}, func(t *testing.T, p gopacket.Packet) {
				tcp := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if !tcp.RST || tcp.ACK || tcp.Seq != 77 {
					t.Errorf("RST %+v", tcp)
				}
				if eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); eth.DstMAC.String() != GlobalVirtualMAC {
					t.Errorf("into the tunnel with dst MAC %s", eth.DstMAC)
				}
			}, false},
		{"UDP gets port unreachable quoting it", pkt("10.244.1.2", "10.244.2.2", &layers.UDP{SrcPort: 40000, DstPort: 5000}, gopacket.Payload("hello, world")),
			Injection{OFPort: 3, podMAC: "aa:00:00:00:00:02"}, func(t *testing.T, p gopacket.Packet) {
				icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
				if icmp.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodePort) || len(icmp.Payload) != 28 {
					t.Errorf("ICMP %v with %d bytes quoted", icmp.TypeCode, len(icmp.Payload))
				}
				ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				if ip.SrcIP.String() != "10.244.2.2" || ip.DstIP.String() != "10.244.1.2" || ip.TOS != 0 {
					t.Errorf("IP %s -> %s tos %d", ip.SrcIP, ip.DstIP, ip.TOS)
				}
			}, false},
		{"ICMP echo gets admin prohibited; an unknown source goes to the gateway", pkt("10.89.0.11", "10.244.1.2", echoReq),
			Injection{OFPort: 2}, func(t *testing.T, p gopacket.Packet) {
				icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
				if icmp.TypeCode.Code() != layers.ICMPv4CodeCommAdminProhibited {
					t.Errorf("ICMP %v", icmp.TypeCode)
				}
			}, false},
		{"an ICMP error is never answered", pkt("10.244.1.2", "10.244.2.2", &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}), Injection{}, nil, true},
		{"a RST is never answered", pkt("10.244.1.2", "10.244.2.2", &layers.TCP{SrcPort: 1, DstPort: 2, RST: true}), Injection{}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, inj, err := RejectReply(cfg, st, tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if inj != tc.wantOut {
				t.Errorf("injection %+v, want %+v", inj, tc.wantOut)
			}
			p := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("reply does not decode: %v", el.Error())
			}
			tc.check(t, p)
		})
	}
}

func TestIsReject(t *testing.T) {
	if !IsReject([]byte{1, 2}) || !IsReject([]byte{1, 3}) || IsReject([]byte{1, 1}) || IsReject([]byte{0, 2}) || IsReject(nil) {
		t.Error("IsReject disagrees with Antrea's userdata")
	}
}
