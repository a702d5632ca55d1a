package tracer

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// countFlows counts every flow in the bridge with the trace's cookie.
func (s *session) countFlows(ctx context.Context) (int, error) {
	bodies, err := s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), openflow.AllTables, s.cookie, cookieMask))
	if err != nil {
		return -1, fmt.Errorf("count the trace's flows: %w", err)
	}
	n := 0
	for _, b := range bodies {
		fds, err := openflow.DecodeFlowDescs(b)
		if err != nil {
			return -1, fmt.Errorf("count the trace's flows: %w", err)
		}
		n += len(fds)
	}
	return n, nil
}

// pipelineFlows counts the bridge's flows that belong to no trace: every
// flow (OpenFlow table statistics) less those whose cookie carries the
// traces' marker (cookieMarker), this trace's and others'.
func (s *session) pipelineFlows(ctx context.Context) (int, error) {
	bodies, err := s.of.Multipart(ctx, openflow.TableStatsRequest(s.of.NextXid()))
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range bodies {
		ts, err := openflow.DecodeTableStats(b)
		if err != nil {
			return 0, err
		}
		for _, t := range ts {
			total += int(t.ActiveCount)
		}
	}
	bodies, err = s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), openflow.AllTables, cookieMarker, markerMask))
	if err != nil {
		return 0, err
	}
	for _, b := range bodies {
		fds, err := openflow.DecodeFlowDescs(b)
		if err != nil {
			return 0, err
		}
		total -= len(fds)
	}
	return max(total, 0), nil
}

// flowsOf reads the flows of every table on the trace's path.
func (s *session) flowsOf(ctx context.Context, t ofproto.Trace) (map[uint8][]openflow.FlowDesc, error) {
	out := map[uint8][]openflow.FlowDesc{}
	for _, h := range t.Hops {
		if h.NoMatch {
			continue
		}
		if _, ok := out[h.Table]; ok {
			continue
		}
		bodies, err := s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), h.Table, 0, 0))
		if err != nil {
			return nil, fmt.Errorf("read flows of table %d: %w", h.Table, err)
		}
		out[h.Table] = []openflow.FlowDesc{}
		for _, b := range bodies {
			fds, err := openflow.DecodeFlowDescs(b)
			if err != nil {
				return nil, fmt.Errorf("read flows of table %d: %w", h.Table, err)
			}
			out[h.Table] = append(out[h.Table], fds...)
		}
	}
	return out, nil
}

// install sends the plan's flows and waits for a barrier, so that an error
// names the flow and nothing is reported ready before OVS has the flows.
// Each flow asks OVS to say when it is removed, and the session remembers
// it, so that flows someone else deletes come back (see restore.go).
//
// A flow that asks OVS to check for overlap (an answer's catch, reply.go)
// goes alone: where OVS refuses it, the trace goes on without it and says
// what it could not catch (refusedCatch).
func (s *session) install(ctx context.Context, p Plan, revalidate bool) error {
	var batch [][]byte
	for _, m := range p.FlowMods {
		flags := openflow.FlowModFlags(m) | openflow.FlagSendFlowRem
		openflow.SetFlowModFlags(m, flags)
		if flags&openflow.FlagCheckOverlap == 0 {
			batch = append(batch, m)
			continue
		}
		err := s.send(ctx, [][]byte{m}, false)
		if openflow.IsOverlap(err) {
			s.refusedCatch(m)
			continue
		}
		if err != nil {
			return err
		}
		s.remember([][]byte{m}, time.Now())
		s.installed++
	}
	s.remember(batch, time.Now())
	s.installed += len(batch)
	return s.send(ctx, batch, revalidate)
}

// send sends flow mods, waits for a barrier and, if revalidate, for OVS to
// have revalidated its datapath flow cache against them.
func (s *session) send(ctx context.Context, msgs [][]byte, revalidate bool) error {
	for _, m := range msgs {
		setXid(m, s.of.NextXid())
		if err := s.of.Send(m); err != nil {
			return err
		}
	}
	if err := s.of.Barrier(ctx); err != nil {
		return fmt.Errorf("install observation flows: %w", err)
	}
	s.timed("install")
	if !revalidate {
		return nil
	}
	if err := s.revalidated(ctx); err != nil {
		return fmt.Errorf("wait for OVS to revalidate its flow cache: %w", err)
	}
	s.timed("revalidate")
	return nil
}

// revalidated returns once a whole revalidator round has run after the
// flows sent so far were in the tables.
//
// The barrier says the flow tables changed, not that the datapath's flow
// cache has caught up: a packet the datapath looks up (one arriving from a
// tunnel) would still hit a megaflow translated before the copies existed,
// which ignores the DSCP tag, until a revalidator round replaces it.
// revalidator/wait answers when the round running at the time of asking
// ends (OVS compares its dump sequence number), and that round may have
// begun before the flows were added. So: wait once, which ends that round;
// touch the flow table, which makes the revalidators start the next round
// at once instead of after max-revalidator (500 ms); wait again, which ends
// a round that began after the flows were in place. No probe is sent twice
// to make up for a stale cache: a second probe would reach the destination
// a second time.
func (s *session) revalidated(ctx context.Context) error {
	if _, err := s.ovs.Call(ctx, "revalidator/wait"); err != nil {
		return err
	}
	bump := openflow.NewFlow(s.of.NextXid(), 0, 0, s.cookie|kindBump, 1, openflow.PktMarkField(ownMark(markBump, s.c.Tag)), nil)
	s.installed++
	if err := s.of.Send(bump); err != nil {
		return err
	}
	if err := s.of.Barrier(ctx); err != nil {
		return err
	}
	_, err := s.ovs.Call(ctx, "revalidator/wait")
	if del, derr := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindBump, ^uint64(0)); derr == nil {
		// Its hard timeout would remove it within a second; a trace's
		// flows are only the ones it reports.
		_ = s.of.Send(del)
	}
	return err
}

func setXid(m []byte, xid uint32) {
	m[4], m[5], m[6], m[7] = byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid)
}
