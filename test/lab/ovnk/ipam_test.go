package ovnk

import (
	"net/netip"
	"strings"
	"testing"
)

func TestIPAM(t *testing.T) {
	type step struct {
		op, owner, node, want string // op: assign (want = address or "error: ..."), release
		ask                   string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"first pods skip network, gateway and management", []step{
			{op: "assign", owner: "d/a", node: "n1", want: "10.244.1.3"},
			{op: "assign", owner: "d/b", node: "n1", want: "10.244.1.4"},
			{op: "assign", owner: "d/c", node: "n2", want: "10.244.2.3"},
		}},
		{"an owner keeps its address", []step{
			{op: "assign", owner: "d/a", node: "n1", want: "10.244.1.3"},
			{op: "assign", owner: "d/a", node: "n1", ask: "10.244.1.9", want: "10.244.1.3"},
		}},
		{"a released address is reused", []step{
			{op: "assign", owner: "d/a", node: "n1", want: "10.244.1.3"},
			{op: "assign", owner: "d/b", node: "n1", want: "10.244.1.4"},
			{op: "release", owner: "d/a"},
			{op: "assign", owner: "d/c", node: "n1", want: "10.244.1.3"},
		}},
		{"a restart keeps existing addresses", []step{
			{op: "assign", owner: "d/b", node: "n1", ask: "10.244.1.7", want: "10.244.1.7"},
			{op: "assign", owner: "d/a", node: "n1", ask: "10.244.1.3", want: "10.244.1.3"},
			{op: "assign", owner: "d/new", node: "n1", want: "10.244.1.4"},
		}},
		{"a reserved or foreign wish is not granted", []step{
			{op: "assign", owner: "d/a", node: "n1", ask: "10.244.1.2", want: "10.244.1.3"},
			{op: "assign", owner: "d/b", node: "n1", ask: "10.244.2.9", want: "10.244.1.4"},
			{op: "assign", owner: "d/c", node: "n1", ask: "10.244.1.3", want: "10.244.1.5"},
			{op: "assign", owner: "d/d", node: "n1", ask: "10.244.1.255", want: "10.244.1.6"},
		}},
		{"unknown node", []step{{op: "assign", owner: "d/a", node: "n9", want: "error: node n9 has no subnet"}}},
		{"a /29 holds four pods, never its broadcast address", []step{
			{op: "assign", owner: "d/a", node: "tiny", want: "10.9.9.3"},
			{op: "assign", owner: "d/b", node: "tiny", want: "10.9.9.4"},
			{op: "assign", owner: "d/c", node: "tiny", want: "10.9.9.5"},
			{op: "assign", owner: "d/d", node: "tiny", want: "10.9.9.6"},
			{op: "assign", owner: "d/e", node: "tiny", want: "error: subnet 10.9.9.0/29 of node tiny is full"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewIPAM()
			p.SetSubnet("n1", netip.MustParsePrefix("10.244.1.0/24"))
			p.SetSubnet("n2", netip.MustParsePrefix("10.244.2.0/24"))
			p.SetSubnet("tiny", netip.MustParsePrefix("10.9.9.0/29"))
			for i, s := range tc.steps {
				if s.op == "release" {
					p.Release(s.owner)
					continue
				}
				var ask netip.Addr
				if s.ask != "" {
					ask = netip.MustParseAddr(s.ask)
				}
				ip, err := p.Assign(s.owner, s.node, ask)
				got := ip.String()
				if err != nil {
					got = "error: " + err.Error()
				}
				if !strings.HasPrefix(got, s.want) {
					t.Errorf("step %d: assign %s on %s: got %s, want %s", i, s.owner, s.node, got, s.want)
				}
			}
		})
	}
}
