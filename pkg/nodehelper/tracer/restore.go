package tracer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// The helper shares the bridge with the CNI's agent, and an agent may
// reconcile the whole flow table: replace every flow with the set it wants
// (`ovs-ofctl --bundle replace-flows`, a full resync after a reconnect, as
// ovn-controller does), removing whatever it did not program. Agents
// resync on cluster events, and a trace makes some itself (its helper
// pods start and end), so a helper's flows can vanish in the middle of a
// trace: a receiver's catch flows then never see the probe.
//
// So every flow of a trace is added with OFPFF_SEND_FLOW_REM, and the
// session remembers the flows it wants in the bridge. OVS tells every
// connection when such a flow is deleted, whoever deleted it (in a serve
// helper, one connection per bridge hears them and hands each trace its
// own: removals.go); when one of the flows the helper still wants goes,
// it sends them again.

// sentFlow is a FLOW_MOD the trace wants in the bridge and when it sent it.
type sentFlow struct {
	msg []byte
	at  time.Time
}

// remember records flow mods as wanted, under the kind in their cookie.
func (s *session) remember(msgs [][]byte, at time.Time) {
	if s.wanted == nil {
		s.wanted = map[uint8][]sentFlow{}
	}
	for _, m := range msgs {
		kind := uint8(openflow.FlowModCookie(m) & 0xff) //nolint:gosec // the low byte
		s.wanted[kind] = append(s.wanted[kind], sentFlow{msg: append([]byte(nil), m...), at: at})
	}
}

// forget is called before the helper itself deletes the flows of a kind,
// so that their removal does not bring them back.
func (s *session) forget(kind uint8) { delete(s.wanted, kind) }

// removedByOther tells whether a flow-removed message is about a flow of
// this trace that the helper still wants: one that someone else deleted.
func (s *session) removedByOther(fr openflow.FlowRemoved) bool {
	if fr.Reason != openflow.RemovedDelete || fr.Cookie&cookieMask != s.cookie {
		return false
	}
	return len(s.wanted[uint8(fr.Cookie&0xff)]) > 0 //nolint:gosec // the low byte
}

// onFlowRemoved handles one flow-removed message (and any others already
// queued): if flows the trace wants are gone, it installs them again with
// what is left of their hard timeout, and waits for OVS to revalidate its
// flow cache, as after the first install.
func (s *session) onFlowRemoved(ctx context.Context, fr openflow.FlowRemoved) error {
	removed := 0
	if s.removedByOther(fr) {
		removed++
	}
	for more := true; more; {
		select {
		case fr := <-s.flowRemoved():
			if s.removedByOther(fr) {
				removed++
			}
		default:
			more = false
		}
	}
	if removed == 0 {
		return nil
	}
	want := 0
	for _, fs := range s.wanted {
		want += len(fs)
	}
	have, err := s.countOwnFlows(ctx)
	if err != nil {
		return err
	}
	if have >= want {
		// Removals the helper has already undone.
		return nil
	}
	s.c.Logf("%d of the trace's %d flows were deleted by another OpenFlow client (a CNI agent replacing the bridge's flows?): installing them again",
		want-have, want)
	var msgs [][]byte
	now := time.Now()
	for _, fs := range s.wanted {
		for _, f := range fs {
			left := time.Duration(openflow.FlowModHardTimeout(f.msg))*time.Second - now.Sub(f.at)
			if left <= 0 {
				continue // it would have expired by now
			}
			m := append([]byte(nil), f.msg...)
			openflow.SetFlowModHardTimeout(m, uint16(math.Ceil(left.Seconds()))) //nolint:gosec // <= the original
			// Without the overlap check (an answer's catch): a refusal
			// would fail the whole batch. Where another process's catch
			// took the place meanwhile, both stay, as before the check.
			openflow.SetFlowModFlags(m, openflow.FlowModFlags(m)&^openflow.FlagCheckOverlap)
			msgs = append(msgs, m)
		}
	}
	if err := s.send(ctx, msgs, true); err != nil {
		return fmt.Errorf("install the trace's flows again after another client deleted them: %w", err)
	}
	return nil
}

// countOwnFlows counts the flows of the trace in the bridge, of the kinds
// it wants there.
func (s *session) countOwnFlows(ctx context.Context) (int, error) {
	bodies, err := s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), openflow.AllTables, s.cookie, cookieMask))
	if err != nil {
		return 0, fmt.Errorf("read the trace's flows: %w", err)
	}
	n := 0
	for _, b := range bodies {
		fds, err := openflow.DecodeFlowDescs(b)
		if err != nil {
			return 0, fmt.Errorf("read the trace's flows: %w", err)
		}
		for _, fd := range fds {
			if len(s.wanted[uint8(fd.Cookie&0xff)]) > 0 { //nolint:gosec // the low byte
				n++
			}
		}
	}
	return n, nil
}
