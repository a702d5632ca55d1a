//go:build integration

package openflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
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
