package tracer

import (
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// On the kernel datapath tunnel ports share one datapath port: the verdict
// must name the one the tunnel metadata picks, not the first listed. The
// dpif/show and the datapath actions are OVS's own (tunnel.at, kernel-style
// tunnel ports; see ../ofproto/testdata/kernel/README.md); the bridge and the
// hop that outputs are written here to match them.
func TestFinalNamesTheKernelTunnelPort(t *testing.T) {
	br := &ovsdb.Bridge{Name: "br0", Ports: []ovsdb.Port{
		{Name: "p1", Ofport: 1, Type: "gre", Options: map[string]string{"remote_ip": "1.1.1.1"}},
		{Name: "p2", Ofport: 2, Type: "gre", Options: map[string]string{"local_ip": "2.2.2.2", "remote_ip": "1.1.1.1"}},
		{Name: "p3", Ofport: 3, Type: "gre", Options: map[string]string{"remote_ip": "2.2.2.2"}},
		{Name: "br0", Ofport: 65534, Type: "internal"},
	}}
	ports := ofproto.ParseDpifShow("dummy@ovs-dummy: hit:0 missed:0\n  br0:\n" + readRecorded(t, "kernel/ovs-tunnel-at-dpif-show.txt"))
	for name, tc := range map[string]struct {
		actions, out, want string
	}{
		"remote_ip":              {"kernel/ovs-tunnel-at-remote-ip.txt", "output:1", "p1"},
		"local_ip and remote_ip": {"kernel/ovs-tunnel-at-local-remote-ip.txt", "output:2", "p2"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := ofproto.Parse(readRecorded(t, tc.actions), "br0")
			tr.Hops = []ofproto.Hop{{Table: 0, Actions: []string{tc.out}}}
			tr.Ports = ports
			i, v := Final(tr, br)
			if i != 0 || v.Action != report.ActionForwarded || v.Port == nil || v.Port.Name != tc.want || v.TunnelDst != "1.1.1.1" {
				t.Errorf("hop %d, %+v", i, v)
			}
		})
	}
}
