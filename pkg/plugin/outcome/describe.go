package outcome

import (
	"fmt"
	"strings"
)

// Describe says in one sentence where the packet's path ended, at h, the
// hop that decided v: the node, the table and flow, the policy behind a
// drop. Whether that end was seen or only predicted is h's, which the
// renderers show.
func Describe(v Verdict, h Hop, dst DestinationKind) string {
	o := h.Observation
	where := fmt.Sprintf("on %s", h.Node)
	table := h.TableName
	if table == "" {
		table = fmt.Sprint(h.TableID)
	}
	switch v {
	case Delivered:
		if o.Pod != "" {
			return fmt.Sprintf("delivered to %s %s", o.Pod, where)
		}
		return "delivered " + where
	case ForwardedOutOfNetwork:
		if dst.onPodNetwork() {
			return fmt.Sprintf("left the pod network %s by table %s (through the gateway or the uplink) and was not seen reaching the destination", where, table)
		}
		s := "left the pod network " + where
		if o.TranslatedSrcIP != "" {
			// Translated as it left: what the node's kernel did
			// to it there (its masquerade), read by the helper.
			s += ", its source translated to " + o.TranslatedSrcIP + " as it left (SNAT)"
		}
		return s
	case Dropped, Rejected:
		s := fmt.Sprintf("%s %s by table %s", strings.ToLower(string(v)), where, table)
		if o.NetworkPolicy != "" {
			s += ", NetworkPolicy " + o.NetworkPolicy
			if o.NetworkPolicyRule != "" {
				s += " rule " + o.NetworkPolicyRule
			}
		}
		if h.Flow != "" {
			s += " (flow " + h.Flow + ")"
		}
		if h.NoPipeline {
			s += ": no flow matched, and the node's bridge held no flow but traces' at that moment: its CNI had not programmed it (ovs-vswitchd or the CNI agent restarting?)"
		}
		return s
	}
	return string(v)
}
