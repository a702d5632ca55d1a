//go:build integration

package openflow_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

// Against a real ovs-vswitchd: the session's handshake, TABLE_FEATURES
// names, an OFPT_ERROR that names the request that caused it, and flows
// added and deleted by cookie.
func TestIntegrationSessionAgainstOVS(t *testing.T) {
	testenv.RequireOVS(t)
	n := ovstest.NewNode(t, 1)
	n.NameTables(map[int]string{0: "Classifier", 7: "SpoofGuard"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openflow.Dial(ctx, n.MgmtSocket(), 4242, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bodies, err := s.Multipart(ctx, openflow.TableFeaturesRequest(s.NextXid()))
	if err != nil {
		t.Fatal(err)
	}
	names := map[uint8]string{}
	for _, b := range bodies {
		tn, err := openflow.DecodeTableFeatures(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range tn {
			names[x.ID] = x.Name
		}
	}
	if names[0] != "Classifier" || names[7] != "SpoofGuard" || len(names) < 200 {
		t.Errorf("table names: 0=%q 7=%q (%d tables)", names[0], names[7], len(names))
	}
	// A flow in table 255 is invalid: OVS answers with an error for it.
	if err := s.Send(openflow.NewFlow(s.NextXid(), 255, 1, 0x1, 0, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.Barrier(ctx); err == nil || !strings.Contains(err.Error(), "message type 14") {
		t.Fatalf("barrier after a bad flow mod: %v, want an error naming the flow mod (type 14)", err)
	}
	const cookie = 0x7466000000001100
	ctl, err := openflow.ControllerAction(4242, []byte{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	for table := uint8(0); table < 3; table++ {
		if err := s.Send(openflow.NewFlow(s.NextXid(), table, 10, cookie|uint64(table), 5, openflow.EthTypeField(0x800), ctl)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(n.DumpFlows("cookie=0x7466000000001100/0xffffffffffffff00"), "hard_timeout=5"); got != 3 {
		t.Fatalf("%d flows with the cookie and hard_timeout, want 3", got)
	}
	del, err := openflow.DeleteByCookie(s.NextXid(), cookie, 0xffffffffffffff00)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(del); err != nil {
		t.Fatal(err)
	}
	if err := s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if f := n.DumpFlows("cookie=0x7466000000001100/0xffffffffffffff00"); strings.Contains(f, "cookie=") {
		t.Fatalf("flows remain after delete by cookie:\n%s", f)
	}
}

// OVS tells every connection of the bridge of each removed flow that asked
// for it (OFPFF_SEND_FLOW_REM), whoever removed it; a connection that sent
// NoFlowRemoved is told of none, and still gets its replies.
func TestIntegrationNoFlowRemoved(t *testing.T) {
	testenv.RequireOVS(t)
	n := ovstest.NewNode(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(id uint16) *openflow.Session {
		s, err := openflow.Dial(ctx, n.MgmtSocket(), id, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	owner, told, quiet := dial(4243), dial(4244), dial(4245)
	if err := quiet.Send(openflow.NoFlowRemoved(quiet.NextXid())); err != nil {
		t.Fatal(err)
	}
	if err := quiet.Barrier(ctx); err != nil {
		t.Fatalf("OVS refused the SET_ASYNC: %v", err)
	}
	const cookie = 0x7466000000002200
	for i := range uint64(3) {
		m := openflow.NewFlow(owner.NextXid(), 0, uint16(10+i), cookie|i, 0, openflow.EthTypeField(0x800), nil)
		openflow.SetFlowModFlags(m, openflow.FlagSendFlowRem)
		if err := owner.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	del, err := openflow.DeleteByCookie(owner.NextXid(), cookie, 0xffffffffffffff00)
	if err == nil {
		err = owner.Send(del)
	}
	if err == nil {
		err = owner.Barrier(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*openflow.Session{owner, told} {
		for i := range 3 {
			select {
			case fr := <-s.FlowRemoved():
				if fr.Cookie&^0xff != cookie || fr.Reason != openflow.RemovedDelete {
					t.Errorf("flow removed %+v, want cookie %#x, reason delete", fr, uint64(cookie))
				}
			case <-ctx.Done():
				t.Fatalf("a connection that did not turn them off was told of %d of 3 removed flows", i)
			}
		}
	}
	// OVS queued the removals to every connection while it deleted the
	// flows, before it answered the owner's barrier: a barrier answered
	// on the quiet connection now comes after any removal sent to it.
	if err := quiet.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case fr := <-quiet.FlowRemoved():
		t.Errorf("the connection that turned flow removals off was told of %+v", fr)
	default:
	}
}

// A session that served a trace serves another with a new controller id
// (Reuse): packet-ins for the new id reach it, and what was queued for
// the old one is gone.
func TestIntegrationSessionReuse(t *testing.T) {
	testenv.RequireOVS(t)
	n := ovstest.NewNode(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openflow.Dial(ctx, n.MgmtSocket(), 100, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	frame, err := probe.Build(probe.Spec{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), Protocol: probe.UDP, SrcPort: 40000, DstPort: 53, Tag: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Table 0 sends every IPv4 packet to the controller with the id the
	// test names in the packet-out's flow (tables 1 and 2).
	for table, id := range map[uint8]uint16{1: 100, 2: 200} {
		ctl, err := openflow.ControllerAction(id, []byte{table}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(openflow.NewFlow(s.NextXid(), table, 10, 0x7466000000002200, 0, openflow.EthTypeField(0x800), ctl)); err != nil {
			t.Fatal(err)
		}
	}
	inject := func(table uint8) {
		t.Helper()
		n.AddFlows("table=0,priority=10,ip,actions=resubmit(," + string('0'+table) + ")")
		po, err := openflow.PacketOut(s.NextXid(), 0xfffffffd, frame)
		if err == nil {
			err = s.Send(po)
		}
		if err == nil {
			err = s.Barrier(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	next := func() openflow.PacketIn {
		t.Helper()
		select {
		case pin := <-s.PacketIns():
			return pin
		case <-ctx.Done():
			t.Fatal("no packet-in")
		}
		return openflow.PacketIn{}
	}
	inject(1)
	if pin := next(); len(pin.Userdata) != 1 || pin.Userdata[0] != 1 {
		t.Fatalf("packet-in for id 100: userdata %x", pin.Userdata)
	}
	if err := s.Reuse(ctx, 200, t.Logf); err != nil {
		t.Fatal(err)
	}
	// Packet-ins are sent in the order OVS made them: had the one for
	// the old id reached the session, it would come first.
	inject(1)
	inject(2)
	if pin := next(); len(pin.Userdata) != 1 || pin.Userdata[0] != 2 {
		t.Fatalf("first packet-in after Reuse(200): userdata %x, want the one for id 200 only", pin.Userdata)
	}
}
