package ovnk

import (
	"net/netip"
	"testing"
)

// The annotations come from the API server, written by anyone: never panic,
// and what NodeSubnet accepts is a masked IPv4 prefix.
func FuzzNodeSubnet(f *testing.F) {
	for _, s := range []string{`{"default":["10.244.1.0/24"]}`, `{"default":"10.244.2.0/24"}`, `{"default":[1]}`, `{}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := NodeSubnet(s)
		if err == nil && (!p.Addr().Is4() || p != p.Masked()) {
			t.Errorf("NodeSubnet(%q) = %v, not a masked IPv4 prefix", s, p)
		}
	})
}

// PodIP reads back what PodNetworks writes, and never panics on the rest.
func FuzzPodIP(f *testing.F) {
	f.Add(`{"default":{"ip_address":"10.244.1.5/24"}}`, uint32(0x0af40105), uint8(24))
	f.Add(`{"default":null}`, uint32(0), uint8(0))
	f.Fuzz(func(t *testing.T, s string, ip uint32, bits uint8) {
		_ = PodIP(s)
		a := netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
		subnet, err := a.Prefix(int(bits % 33))
		if err != nil {
			return
		}
		if got := PodIP(PodNetworks(a, subnet)); got != a {
			t.Errorf("PodIP(PodNetworks(%v, %v)) = %v", a, subnet, got)
		}
	})
}
