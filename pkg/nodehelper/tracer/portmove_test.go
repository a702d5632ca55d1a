package tracer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

// ArmMovedPort catches the answer at the source port conntrack moved the
// probe to, from the address the probe went on to, once; never for the
// probe's own port, another source address (ArmTranslated's) or an echo
// request; and it does not make a translated source count as followed.
func TestArmMovedPort(t *testing.T) {
	moved := tcpProbe(podIP, 50124)
	const bit = ",xreg7=0x0000000000000000/0x0000000000000020"
	catchAt := func(port string) []string {
		return []string{"dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=3" + bit, "dl_type=0x0800,nw_proto=1,nw_dst=10.244.0.5,icmp_type=11" + bit,
			"dl_type=0x0800,nw_proto=6,nw_dst=10.244.0.5,tp_dst=" + port + bit}
	}
	echo := tcpProbe(podIP, 0)
	echo.Protocol, echo.ICMPID = probe.ICMP, 0x4243
	for _, tc := range []struct {
		name     string
		frames   []probe.Spec
		requests [][]string
		// movedAnswer: whether the SYN-ACK to the moved port is an answer.
		movedAnswer bool
	}{
		{"moved", []probe.Spec{moved}, [][]string{catchAt("50124")}, true},
		{"moved, seen twice", []probe.Spec{moved, moved}, [][]string{catchAt("50124")}, true},
		{"the probe's own port", []probe.Spec{tcpProbe(podIP, 50123)}, nil, false},
		{"another source address", []probe.Spec{tcpProbe(snatIP, 50124)}, nil, false},
		{"an echo request", []probe.Spec{echo}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{c: Common{Tag: 5, Timeout: 10 * time.Second, Logf: func(string, ...any) {}}, ctlID: 9, cookie: TraceCookie(5, 1),
				extraCatch: make(chan catchRequest)}
			r := &ReplyRun{s: s, tos: []probe.ReplyTo{tcpProbe(podIP, 50123).Reply()}, done: make(chan struct{})}
			wait := serveCatch(s, nil)
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				for _, f := range tc.frames {
					r.ArmMovedPort(build(t, f), podIP)
				}
			}()
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("ArmMovedPort did not return")
			}
			var requests [][]string
			for _, p := range wait.close() {
				requests = append(requests, catchMatches(t, p))
			}
			if d := cmp.Diff(tc.requests, requests); d != "" {
				t.Errorf("catch requests' matches (-want +got):\n%s", d)
			}
			if r.anyAddress.Load() {
				t.Error("anyAddress set: a moved port is no translated source")
			}
			if _, ok := r.answers(synAck(t, outsideIP, podIP, 50124)); ok != tc.movedAnswer {
				t.Errorf("the SYN-ACK to the moved port is an answer: %v, want %v", ok, tc.movedAnswer)
			}
			if _, ok := r.answers(synAck(t, strangerIP, podIP, 50124)); ok {
				t.Error("a SYN-ACK to the moved port from another address is an answer")
			}
			if _, ok := r.answers(synAck(t, outsideIP, podIP, 50123)); !ok {
				t.Error("the SYN-ACK to the probe's own port is no answer any more")
			}
		})
	}
}
