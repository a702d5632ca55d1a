package tracer

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

func TestCatchKeysCollide(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	k := catchKey{ovs: "n1", proto: 6, num: 61000, dst: a}
	for name, tc := range map[string]struct {
		o    catchKey
		want bool
	}{
		"same":              {k, true},
		"any address":       {catchKey{ovs: "n1", proto: 6, num: 61000}, true},
		"other address":     {catchKey{ovs: "n1", proto: 6, num: 61000, dst: b}, false},
		"other port":        {catchKey{ovs: "n1", proto: 6, num: 61001, dst: a}, false},
		"other protocol":    {catchKey{ovs: "n1", proto: 17, num: 61000, dst: a}, false},
		"other bridge":      {catchKey{ovs: "n2", proto: 6, num: 61000, dst: a}, false},
		"other IP version":  {catchKey{ovs: "n1", v6: true, proto: 6, num: 61000, dst: a}, false},
		"ICMP, same source": {catchKey{ovs: "n1", proto: 1, num: 3, dst: a}, false},
	} {
		if got := k.collides(tc.o); got != tc.want || tc.o.collides(k) != tc.want {
			t.Errorf("%s: collides %v, want %v both ways", name, got, tc.want)
		}
	}
}

func TestCatchKeysTryWaitRelease(t *testing.T) {
	c := &catchKeys{freed: make(chan struct{})}
	a := netip.MustParseAddr("10.0.0.1")
	errs := catchKey{ovs: "n1", proto: 1, num: 3, dst: a}
	port := catchKey{ovs: "n1", proto: 6, num: 61000, dst: a}
	if got := c.try(1, []catchKey{errs, port}); len(got) != 2 {
		t.Fatalf("first owner took %v, want both keys", got)
	}
	if got := c.try(2, []catchKey{errs, {ovs: "n1", proto: 6, num: 61001, dst: a}}); len(got) != 1 || got[0].num != 61001 {
		t.Fatalf("second owner took %v, want only its own port", got)
	}
	if got := c.try(1, []catchKey{port}); len(got) != 1 {
		t.Fatalf("an owner takes again what it holds: got %v", got)
	}

	// A waiter gets its keys once no other owner holds any of them; while
	// it waits, nobody tries them away from it.
	port2 := catchKey{ovs: "n1", proto: 6, num: 61001, dst: a}
	waited := make(chan error, 1)
	go func() { waited <- c.wait(context.Background(), 3, []catchKey{errs, port2}) }()
	for {
		c.mu.Lock()
		n := len(c.waiting)
		c.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.release(1, []catchKey{errs, port, port})
	if got := c.try(4, []catchKey{errs}); len(got) != 0 {
		t.Fatalf("a key a waiter waits for was tried away: %v", got)
	}
	select {
	case err := <-waited:
		t.Fatalf("waiter returned (%v) while owner 2 held one of its keys", err)
	default:
	}
	c.release(2, []catchKey{port2})
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if got := c.try(1, []catchKey{port}); len(got) != 1 {
		t.Fatalf("a key let go by every hold is free: got %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.wait(ctx, 5, []catchKey{errs}); err == nil {
		t.Fatal("wait took a key another owner holds")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) != 0 {
		t.Errorf("a waiter that gave up is still waiting: %+v", c.waiting)
	}
}

// A catch flow OVS refuses names the kind of answer it would have caught,
// read back from the flow mod's own match.
func TestCatchClassOfRefusedFlow(t *testing.T) {
	a4, a6 := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("fd00::2")
	for _, tc := range []struct {
		match []byte
		want  string
	}{
		{append(append(openflow.EthTypeField(0x0800), openflow.IPProtoField(6)...), openflow.L4DstField(6, 61111)...), "TCP"},
		{append(append(openflow.EthTypeField(0x0800), openflow.IPProtoField(17)...), openflow.L4DstField(17, 61111)...), "UDP"},
		{append(append(append(openflow.EthTypeField(0x0800), openflow.IPProtoField(1)...), openflow.IPDstField(a4)...), openflow.ICMPTypeField(false, 0)...), "echo reply"},
		{append(append(append(openflow.EthTypeField(0x0800), openflow.IPProtoField(1)...), openflow.IPDstField(a4)...), openflow.ICMPTypeField(false, 3)...), "ICMP error"},
		{append(append(append(openflow.EthTypeField(0x86dd), openflow.IPProtoField(58)...), openflow.IPDstField(a6)...), openflow.ICMPTypeField(true, 129)...), "echo reply"},
		{append(append(append(openflow.EthTypeField(0x86dd), openflow.IPProtoField(58)...), openflow.IPDstField(a6)...), openflow.ICMPTypeField(true, 1)...), "ICMP error"},
	} {
		m := append(tc.match, openflow.XReg7BitClearField(41)...)
		f := openflow.NewFlow(0, 0, answerCatchPriority, 0, 10, m, nil)
		fields, err := openflow.FlowModMatch(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := catchClassOf(fields); got != tc.want {
			t.Errorf("%x: class %q, want %q", tc.match, got, tc.want)
		}
	}
}
