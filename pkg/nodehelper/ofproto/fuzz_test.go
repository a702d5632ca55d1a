package ofproto

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seeds are the recorded outputs of OVS: the fuzzers start from what OVS
// really prints.
func seeds(f *testing.F) []string {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata: %v", err)
	}
	var out []string
	for _, p := range files {
		b, err := os.ReadFile(p) //nolint:gosec // the package's own testdata
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s, "br-int")
	}
	f.Fuzz(func(t *testing.T, text, br string) {
		tr := Parse(text, br)
		for _, h := range append(tr.Hops, tr.Elsewhere...) {
			if h.Depth < 0 {
				t.Fatalf("negative depth: %+v", h)
			}
			_ = h.Outputs()
			_ = h.Drops()
			_ = h.Controllers()
		}
		_ = tr.Dropped()
	})
}

func FuzzParseDatapathActions(f *testing.F) {
	for _, s := range seeds(f) {
		for _, line := range strings.Split(s, "\n") {
			if a, ok := strings.CutPrefix(line, "Datapath actions: "); ok {
				f.Add(a)
			}
		}
	}
	f.Add("clone(clone(check_pkt_len(size=1,gt(1),le(tnl_push(tnl_port(1),header(ipv4(src=1,dst=2))),3))))")
	f.Fuzz(func(t *testing.T, s string) {
		fate := ParseDatapathActions(s)
		if fate.Dropped() && (len(fate.Outputs) > 0 || fate.Recirc || fate.Controller) {
			t.Fatalf("dropped and not: %+v", fate)
		}
	})
}

func FuzzParseDpifShow(f *testing.F) {
	for _, s := range seeds(f) {
		if strings.HasPrefix(s, "netdev@") || strings.HasPrefix(s, "system@") {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		ports := ParseDpifShow(s)
		for _, p := range ports {
			if q, ok := ports.Lookup(p.Bridge, p.DPPort); ok && q.DPPort != p.DPPort {
				t.Fatalf("looked up %d, found %+v", p.DPPort, q)
			}
		}
	})
}

func FuzzParseController(f *testing.F) {
	f.Add("controller(userdata=01.02)")
	f.Add("controller(reason=no_match,id=5,userdata=00.00.00.16.00.00.00.00,pause)")
	f.Add("CONTROLLER:65535")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseController(s)
	})
}
