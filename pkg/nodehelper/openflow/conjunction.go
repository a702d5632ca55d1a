package openflow

import (
	"encoding/binary"
	"fmt"
)

// nxastConjunction is NXAST_CONJUNCTION, the Nicira action subtype of
// conjunction(id, k/n).
const nxastConjunction = 34

// OpenFlow 1.5 instruction types that carry actions.
const (
	instWriteActions = 3
)

// Conjunction is one conjunction(ID, Clause/NClauses) action: the flow is
// clause Clause (1-based, as ovs-ofctl writes it) of NClauses of the
// conjunctive match ID.
type Conjunction struct {
	ID       uint32
	Clause   uint8
	NClauses uint8
}

// ConjunctionAction encodes conjunction(c.ID, c.Clause/c.NClauses) as
// NXAST_CONJUNCTION: vendor header, subtype, clause (0-based on the wire),
// n_clauses, id.
func ConjunctionAction(c Conjunction) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b, 0xffff)
	binary.BigEndian.PutUint16(b[2:], 16)
	binary.BigEndian.PutUint32(b[4:], nxVendorID)
	binary.BigEndian.PutUint16(b[8:], nxastConjunction)
	b[10] = c.Clause - 1
	b[11] = c.NClauses
	binary.BigEndian.PutUint32(b[12:], c.ID)
	return b
}

// Conjunctions returns the conjunction actions among a flow's
// instructions (apply-actions and write-actions), in order.
func Conjunctions(instructions []byte) []Conjunction {
	var out []Conjunction
	forEachAction(instructions, func(a []byte) {
		if len(a) >= 16 && binary.BigEndian.Uint16(a) == 0xffff && binary.BigEndian.Uint32(a[4:]) == nxVendorID &&
			binary.BigEndian.Uint16(a[8:]) == nxastConjunction {
			out = append(out, Conjunction{ID: binary.BigEndian.Uint32(a[12:]), Clause: a[10] + 1, NClauses: a[11]})
		}
	})
	return out
}

// forEachAction calls f with each action of the apply-actions and
// write-actions instructions in inst.
func forEachAction(inst []byte, f func(action []byte)) {
	for off := 0; off+4 <= len(inst); {
		t := binary.BigEndian.Uint16(inst[off:])
		l := int(binary.BigEndian.Uint16(inst[off+2:]))
		if l < 4 || off+l > len(inst) {
			return
		}
		if (t == instApplyActions || t == instWriteActions) && l >= 8 {
			acts := inst[off+8 : off+l]
			for len(acts) >= 4 {
				al := int(binary.BigEndian.Uint16(acts[2:]))
				if al < 4 || al > len(acts) {
					break
				}
				f(acts[:al])
				acts = acts[al:]
			}
		}
		off += l
	}
}

// nxmConjID is NXM_NX_CONJ_ID.
const nxmConjID = 37

// ConjIDField is NXM_NX_CONJ_ID.
func ConjIDField(id uint32) []byte {
	return oxm(classNXM1, nxmConjID, binary.BigEndian.AppendUint32(nil, id))
}

// ConjIDOf returns the conj_id a match requires.
func ConjIDOf(match []byte) (uint32, bool) {
	fs, _ := ParseOXM(match)
	for _, f := range fs {
		if f.Class == classNXM1 && f.Field == nxmConjID && !f.HasMask && len(f.Value) == 4 {
			return binary.BigEndian.Uint32(f.Value), true
		}
	}
	return 0, false
}

// WithConjID returns match with its conj_id field replaced by id.
func WithConjID(match []byte, id uint32) ([]byte, error) {
	fs, err := ParseOXM(match)
	if err != nil {
		return nil, err
	}
	var out []byte
	found := false
	for _, f := range fs {
		if f.Class == classNXM1 && f.Field == nxmConjID && !f.HasMask {
			out = append(out, ConjIDField(id)...)
			found = true
			continue
		}
		out = append(out, encodeOXM(f)...)
	}
	if !found {
		return nil, fmt.Errorf("the match has no conj_id")
	}
	return out, nil
}
