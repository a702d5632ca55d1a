package tracer

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

// A probe from pod 10.244.0.5:50123 to 1.1.1.1:80, outside the pod
// network, that a gateway router's SNAT translates to 172.18.0.3:40001.
var (
	podIP      = netip.MustParseAddr("10.244.0.5")
	outsideIP  = netip.MustParseAddr("1.1.1.1")
	snatIP     = netip.MustParseAddr("172.18.0.3")
	strangerIP = netip.MustParseAddr("9.9.9.9")
)

const (
	probeTag  = 9
	probeMark = 0x1234
)

func tcpProbe(src netip.Addr, srcPort uint16) probe.Spec {
	return probe.Spec{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, SrcIP: src, DstIP: outsideIP,
		Protocol: probe.TCP, SrcPort: srcPort, DstPort: 80, TCPFlags: 2, Tag: probeTag, Mark: probeMark}
}

func build(t *testing.T, s probe.Spec) []byte {
	t.Helper()
	f, err := probe.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// synAck is the SYN-ACK of the probe's SYN from src:80 to dst:port.
func synAck(t *testing.T, src, dst netip.Addr, port uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	tcp := &layers.TCP{SrcPort: 80, DstPort: layers.TCPPort(port), SYN: true, ACK: true, Ack: 2, Window: 1000}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The probe is known by its tag and mark wherever the pipeline translated
// its source, port included (a gateway router's SNAT picks one), or its
// port alone (conntrack moves the source port of a DNAT whose answer's
// tuple an earlier connection still holds); a packet going back to its
// source (an answer that copied tag and mark) is not the probe.
func TestIsProbeTranslatedSource(t *testing.T) {
	wrongMark := tcpProbe(snatIP, 40001)
	wrongMark.Mark = 0x999
	wrongTag := tcpProbe(snatIP, 40001)
	wrongTag.Tag = 10
	back := tcpProbe(outsideIP, 80)
	back.DstIP = podIP
	icmp := tcpProbe(snatIP, 0)
	icmp.Protocol, icmp.ICMPID = probe.ICMP, 0x4242
	udp := tcpProbe(snatIP, 40002)
	udp.Protocol = probe.UDP
	for _, tc := range []struct {
		name  string
		frame probe.Spec
		want  bool
	}{
		{"the probe as sent", tcpProbe(podIP, 50123), true},
		{"source address and port translated", tcpProbe(snatIP, 40001), true},
		{"source address translated, port kept", tcpProbe(snatIP, 50123), true},
		{"UDP, source address and port translated", udp, true},
		{"echo request, source address and identifier translated", icmp, true},
		{"the probe's source address with another port (a DNAT that met a tracked connection)", tcpProbe(podIP, 50124), true},
		{"back to the probe's source, tag and mark copied", back, false},
		{"translated, another mark", wrongMark, false},
		{"translated, another tag", wrongTag, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{c: Common{Tag: probeTag, Mark: probeMark}, probeSrcIP: podIP, probeSrcPort: 50123}
			if got := s.isProbe(build(t, tc.frame)); got != tc.want {
				t.Errorf("isProbe = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeWait plays waitCatch's part for an answer's trace: it takes each
// catchRequest from s.extraCatch, keeps its plan and answers err.
type fakeWait struct {
	mu    sync.Mutex
	plans []Plan
	stop  chan struct{}
	wg    sync.WaitGroup
}

func serveCatch(s *session, err error) *fakeWait {
	f := &fakeWait{stop: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			select {
			case req := <-s.extraCatch:
				f.mu.Lock()
				f.plans = append(f.plans, req.plan)
				f.mu.Unlock()
				req.done <- err
			case <-f.stop:
				return
			}
		}
	}()
	return f
}

func (f *fakeWait) close() []Plan {
	close(f.stop)
	f.wg.Wait()
	return f.plans
}

func catchMatches(t *testing.T, p Plan) []string {
	t.Helper()
	var got []string
	for _, m := range p.FlowMods {
		got = append(got, openflow.FormatMatch(splitFlowMod(t, m).match))
	}
	return got
}

// takes is whether a catch takes an answer.
type takes int

const (
	either takes = iota
	taken
	notTaken
)

// The run's state when ArmTranslated is called.
const (
	armed    = iota // the answer's trace waits for its answer
	notArmed        // Arm was not called (done nil)
	ended           // the answer's trace has ended (done closed)
)

// ArmTranslated adds the translated probe's answer, from the probe's
// destination only, to what the catch takes, and asks the waiting
// answer's trace to catch it at the translated address and port; once per
// translation, never for the probe's own source, and not where the
// answer's trace is not armed or has ended. Only catch flows in the tables
// let a translated source pass as followed (anyAddress).
func TestArmTranslated(t *testing.T) {
	snat := tcpProbe(snatIP, 40001)
	snatOtherPort := tcpProbe(snatIP, 40002)
	// The trace's tag (5) is its catches' register bit (answerCatch).
	const bit = ",xreg7=0x0000000000000000/0x0000000000000020"
	catchAt := func(port string) []string {
		return []string{"dl_type=0x0800,nw_proto=1,nw_dst=172.18.0.3,icmp_type=3" + bit, "dl_type=0x0800,nw_proto=1,nw_dst=172.18.0.3,icmp_type=11" + bit,
			"dl_type=0x0800,nw_proto=6,nw_dst=172.18.0.3,tp_dst=" + port + bit}
	}
	for _, tc := range []struct {
		name       string
		state      int
		installErr error
		frames     []probe.Spec
		// requests are the catch flows' matches of each request.
		requests   [][]string
		anyAddress bool
		// translated: whether the SYN-ACK from the destination to the
		// translated address and port is an answer.
		translated takes
	}{
		{"translated", armed, nil, []probe.Spec{snat}, [][]string{catchAt("40001")}, true, taken},
		{"the same translation twice", armed, nil, []probe.Spec{snat, snat}, [][]string{catchAt("40001")}, true, taken},
		{"another port after", armed, nil, []probe.Spec{snat, snatOtherPort}, [][]string{catchAt("40001"), catchAt("40002")}, true, taken},
		{"the probe's own source", armed, nil, []probe.Spec{tcpProbe(podIP, 50123)}, nil, false, notTaken},
		// Whether the catch still takes the translated answer once its
		// flows failed, or the trace ended, is left open: nothing would
		// bring it to the catch.
		{"the catch refused", armed, errors.New("OFPBAC_BAD_OUT_PORT"), []probe.Spec{snat}, [][]string{catchAt("40001")}, false, either},
		{"not armed", notArmed, nil, []probe.Spec{snat}, nil, false, notTaken},
		{"the answer's trace ended", ended, nil, []probe.Spec{snat}, nil, false, either},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{c: Common{Tag: 5, Timeout: 10 * time.Second, Logf: func(string, ...any) {}}, ctlID: 9, cookie: TraceCookie(5, 1),
				extraCatch: make(chan catchRequest)}
			r := &ReplyRun{s: s, tos: []probe.ReplyTo{tcpProbe(podIP, 50123).Reply()}}
			var wait *fakeWait
			switch tc.state {
			case armed, notArmed:
				r.done = make(chan struct{})
				wait = serveCatch(s, tc.installErr)
				if tc.state == notArmed {
					r.done = nil
				}
			case ended:
				r.done = make(chan struct{})
				close(r.done)
			}
			armTranslated(t, r, tc.frames)
			var requests [][]string
			if wait != nil {
				for _, p := range wait.close() {
					requests = append(requests, catchMatches(t, p))
				}
			}
			if d := cmp.Diff(tc.requests, requests); d != "" {
				t.Errorf("catch requests' matches (-want +got):\n%s", d)
			}
			if got := r.anyAddress.Load(); got != tc.anyAddress {
				t.Errorf("anyAddress = %v, want %v", got, tc.anyAddress)
			}
			checkAnswers(t, r, tc.translated)
		})
	}
}

// armTranslated calls r.ArmTranslated with each frame in turn, as the
// probe's continuations show it, and fails where it does not return.
func armTranslated(t *testing.T, r *ReplyRun, specs []probe.Spec) {
	t.Helper()
	var frames [][]byte
	for _, s := range specs {
		frames = append(frames, build(t, s))
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for _, f := range frames {
			r.ArmTranslated(f, podIP, outsideIP)
		}
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("ArmTranslated did not return")
	}
}

// checkAnswers checks what r's catch takes: the answer to the probe as
// sent, the answer to its translation where translated, and never an
// answer from another address than the destination.
func checkAnswers(t *testing.T, r *ReplyRun, translated takes) {
	t.Helper()
	for _, a := range []struct {
		name  string
		frame []byte
		want  takes
	}{
		{"the SYN-ACK to the probe as sent", synAck(t, outsideIP, podIP, 50123), taken},
		{"the SYN-ACK to the translated source", synAck(t, outsideIP, snatIP, 40001), translated},
		{"a SYN-ACK to the translated source from another address", synAck(t, strangerIP, snatIP, 40001), notTaken},
		{"a SYN-ACK to the translated address and another port", synAck(t, outsideIP, snatIP, 40003), notTaken},
	} {
		got, ok := r.answers(a.frame)
		if a.want != either && ok != (a.want == taken) {
			t.Errorf("%s: answers = %+v, %v; want %v", a.name, got, ok, a.want == taken)
		}
		if ok && got.From != outsideIP.String() {
			t.Errorf("%s: from %s, want %s", a.name, got.From, outsideIP)
		}
	}
}
