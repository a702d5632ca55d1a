package ofproto

import (
	"os"
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

func FuzzParse(f *testing.F) {
	f.Add("10. ip, priority 1, cookie 0x1\n    output:3\n", "br-int")
	f.Fuzz(func(t *testing.T, text, br string) {
		tr := Parse(text, br)
		for _, h := range tr.Hops {
			_ = h.Outputs()
			_ = h.Drops()
		}
	})
}
