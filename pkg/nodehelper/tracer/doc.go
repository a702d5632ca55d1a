// Package tracer traces a probe through a node's OVS pipeline without
// knowing the pipeline ("trace-guided observation"): it asks OVS for its
// trace of the exact probe, installs a tagged copy of every flow on that
// path (same match plus the DSCP tag, one priority higher, the trace's
// cookie and hard timeout, a controller action with the trace's own
// controller id in front of the original actions), injects the probe and
// turns the packet-ins of the real packet into observations, each
// explained by the trace's hop.
//
// Choices, and why:
//   - Copies keep the original actions, also on the last hop: the probe is
//     really delivered to the destination pod (the issue asks for the packet
//     on the pod's interface; Antrea instead reports without delivering).
//     A copy of an output into a tunnel keeps its output, so the receiver
//     sees the real packet.
//   - A table miss on the path gets a lowest-priority tagged flow that only
//     reports, so a drop there is observed, not inferred.
//   - A hop's copy is of its own flow only: the one among the table's flows
//     with the hop's priority and cookie whose match is the match OVS's
//     trace printed (compared field by field, openflow.MatchIs). A CNI may
//     give a whole feature one cookie (Antrea does), so priority and cookie
//     alone name many flows, conjunction clauses among them, which OVS
//     refuses to combine with a controller action. Only where the match
//     cannot be compared (a field the helper does not know) does every flow
//     with the hop's priority and cookie get a copy, clause flows never:
//     only the one the packet really matches fires (Plan.Siblings).
//   - A conjunctive flow (conj_id=N) cannot be watched by a copy one
//     priority up, since conj_id is set only by its clause flows (at their
//     own priority, which may be another): the helper clones the
//     conjunction under an id of its own (cloneConjunction).
//   - Where OVS's trace ends in a recirculation it cannot follow (a dp_hash
//     select group), the last copy marks the probe and catchers pause it
//     where it reenters a table; the helper traces on from there with the
//     real packet's metadata and resumes it (continuation.go).
//   - The probe carries a mark in its IPv4 identification or IPv6 flow
//     label besides the tag, because replies may copy the DSCP.
//   - After installing flows that a packet looked up in the datapath's
//     cache would need, the helper waits for a revalidator round that began
//     after they were installed (revalidated), since cached datapath flows
//     translated before the copies would carry the probe past them. The
//     probe is injected once: a trace never sends a second probe that could
//     reach the destination.
//   - A CNI agent may replace the bridge's whole flow table on a resync,
//     deleting the helper's flows (the lab's agent does on every cluster
//     event, a trace's own helper pods included): every flow asks OVS for
//     a flow-removed message, and the helper installs again the flows it
//     still wants (restore.go).
package tracer
