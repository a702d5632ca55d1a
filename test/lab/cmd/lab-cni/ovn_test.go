package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParsePodNetworks(t *testing.T) {
	tests := []struct {
		name, in      string
		addr, mac, gw string
		wantErr       string
	}{
		{
			name: "as lab-ovnkube and OVN-Kubernetes write it",
			in:   `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"],"ip_address":"10.244.1.5/24","gateway_ip":"10.244.1.1"}}`,
			addr: "10.244.1.5/24", mac: "0a:58:0a:f4:01:05", gw: "10.244.1.1",
		},
		{
			name: "only the older single fields",
			in:   `{"default":{"mac_address":"0a:58:0a:f4:02:07","ip_address":"10.244.2.7/24","gateway_ip":"10.244.2.1"}}`,
			addr: "10.244.2.7/24", mac: "0a:58:0a:f4:02:07", gw: "10.244.2.1",
		},
		{name: "not JSON", in: `{`, wantErr: "k8s.ovn.org/pod-networks"},
		{name: "no default network", in: `{"other":{}}`, wantErr: `no "default"`},
		{name: "no address", in: `{"default":{"mac_address":"0a:58:0a:f4:01:05","gateway_ip":"10.244.1.1"}}`, wantErr: "address"},
		{name: "IPv6", in: `{"default":{"ip_addresses":["fd00::5/64"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["fd00::1"]}}`, wantErr: "not IPv4"},
		{name: "bad MAC", in: `{"default":{"ip_address":"10.244.1.5/24","gateway_ip":"10.244.1.1","mac_address":"nope"}}`, wantErr: "MAC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePodNetworks(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Addr.String() != tc.addr || got.MAC.String() != tc.mac || got.Gateway.String() != tc.gw {
				t.Errorf("got %s %s %s, want %s %s %s", got.Addr, got.MAC, got.Gateway, tc.addr, tc.mac, tc.gw)
			}
		})
	}
}

func FuzzParsePodNetworks(f *testing.F) {
	f.Add(`{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"]}}`)
	f.Add(`{"default":{"ip_address":"10.244.2.7/24","gateway_ip":"10.244.2.1","mac_address":"0a:58:0a:f4:02:07"}}`)
	f.Add(`{"default":null}`)
	f.Fuzz(func(t *testing.T, s string) {
		pn, err := parsePodNetworks(s)
		if err == nil && (!pn.Addr.Addr().Is4() || !pn.Gateway.Is4() || len(pn.MAC) != 6) {
			t.Errorf("accepted %q as %+v", s, pn)
		}
	})
}

func TestOVNInterfaceIDs(t *testing.T) {
	pn, err := parsePodNetworks(`{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ovnInterfaceIDs(env{podNamespace: "demo", podName: "pod-a", containerID: "c0ffee"}, "uid-1", pn), " ")
	want := `external_ids:iface-id="demo_pod-a" external_ids:iface-id-ver="uid-1" external_ids:attached_mac="0a:58:0a:f4:01:05" external_ids:ip_addresses="10.244.1.5/24" external_ids:sandbox="c0ffee"`
	if got != want {
		t.Errorf("ovnInterfaceIDs:\n got %s\nwant %s", got, want)
	}
}

func TestGetPod(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/demo/pods/pod-a":
			_, _ = w.Write([]byte(`{"metadata":{"uid":"u1","annotations":{"k8s.ovn.org/pod-networks":"{}"}}}`))
		default:
			http.Error(w, `{"kind":"Status","reason":"NotFound"}`, http.StatusNotFound)
		}
	}))
	defer srv.Close()
	p, err := getPod(context.Background(), srv.Client(), srv.URL, "demo", "pod-a")
	if err != nil || p.Metadata.UID != "u1" || p.Metadata.Annotations[podNetworksAnnotation] != "{}" {
		t.Errorf("getPod = %+v, %v", p, err)
	}
	if _, err := getPod(context.Background(), srv.Client(), srv.URL, "demo", "gone"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing pod: err = %v, want the 404", err)
	}
}
