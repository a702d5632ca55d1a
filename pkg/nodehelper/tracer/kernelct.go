package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The node's kernel may translate a probe that leaves OVS through an
// internal port (Antrea's antrea-gw0): its iptables masquerade a pod's
// packet to an address outside the cluster. OVS does not see that; the
// kernel's conntrack does. The helper reads the connection the probe made
// there (ctnetlink, the interface conntrack(8) uses) and reports the
// address the kernel gave the probe's source. These are the netlink
// messages, built and read without a socket so that tests need no kernel.

// ctnetlink's message types, attributes and group (linux/netfilter/
// nfnetlink_conntrack.h).
const (
	ctSubsys      = 1 // NFNL_SUBSYS_CTNETLINK
	ctMsgNew      = 0 // IPCTNL_MSG_CT_NEW
	ctMsgGet      = 1
	ctMsgDelete   = 2
	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaZone       = 18
	ctaTupleIP    = 1
	ctaTupleProto = 2
	ctaIPv4Src    = 1
	ctaIPv4Dst    = 2
	ctaIPv6Src    = 3
	ctaIPv6Dst    = 4
	ctaProtoNum   = 1
	ctaSrcPort    = 2
	ctaDstPort    = 3
	ctaICMPID     = 4
	ctaICMPType   = 5
	ctaICMPCode   = 6
	ctaICMPv6ID   = 7
	ctaICMPv6Type = 8
	ctaICMPv6Code = 9
	nlaNested     = 0x8000
	nlaTypeMask   = 0x3fff
	// Linux's own values, spelled out so that the package builds
	// elsewhere (the plugin's tests on a workstation).
	nlmsgHdrLen  = 16
	nlmsgError   = 2
	nlmFRequest  = 1
	nlmFAck      = 4
	linuxAFInet  = 2
	linuxAFInet6 = 10
	linuxENOENT  = 2
)

// ctTuple is one direction of a connection as conntrack keys it. For
// ICMP, ID is the echo identifier and Type and Code the message's.
type ctTuple struct {
	Proto            uint8
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	ID               uint16
	Type, Code       uint8
}

func (t ctTuple) String() string {
	switch t.Proto {
	case 1, 58:
		return fmt.Sprintf("icmp %s -> %s id %d", t.Src, t.Dst, t.ID)
	case 6:
		return fmt.Sprintf("tcp %s -> %s", netip.AddrPortFrom(t.Src, t.SrcPort), netip.AddrPortFrom(t.Dst, t.DstPort))
	}
	return fmt.Sprintf("udp %s -> %s", netip.AddrPortFrom(t.Src, t.SrcPort), netip.AddrPortFrom(t.Dst, t.DstPort))
}

// ctEntry is a connection the kernel tracks: both directions and its
// zone (0 for the host's own stack; OVS's kernel datapath uses others).
type ctEntry struct {
	Orig, Reply ctTuple
	Zone        uint16
}

// DestinationTranslated says whether the kernel rewrites the original
// direction's destination (a DNAT): the answer comes from another address
// or port than the one the packet was sent to.
func (e ctEntry) DestinationTranslated() bool {
	if e.Reply.Src != e.Orig.Dst {
		return true
	}
	return (e.Orig.Proto == 6 || e.Orig.Proto == 17) && e.Reply.SrcPort != e.Orig.DstPort
}

// SourceTranslated says whether the kernel rewrites the original
// direction's source: the answer comes back to another address or port.
func (e ctEntry) SourceTranslated() bool {
	if e.Reply.Dst != e.Orig.Src {
		return true
	}
	if e.Orig.Proto == 6 || e.Orig.Proto == 17 {
		return e.Reply.DstPort != e.Orig.SrcPort
	}
	return e.Reply.ID != e.Orig.ID
}

// frameTuple is the conntrack tuple of an Ethernet frame carrying TCP,
// UDP or an ICMP echo request.
func frameTuple(frame []byte) (ctTuple, bool) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var t ctTuple
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		t.Src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		t.Dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		t.Src, _ = netip.AddrFromSlice(ip.SrcIP)
		t.Dst, _ = netip.AddrFromSlice(ip.DstIP)
	default:
		return t, false
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		t.Proto, t.SrcPort, t.DstPort = 6, uint16(l4.SrcPort), uint16(l4.DstPort)
		return t, true
	case *layers.UDP:
		t.Proto, t.SrcPort, t.DstPort = 17, uint16(l4.SrcPort), uint16(l4.DstPort)
		return t, true
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && ic.TypeCode.Type() == layers.ICMPv4TypeEchoRequest {
		t.Proto, t.ID, t.Type = 1, ic.Id, layers.ICMPv4TypeEchoRequest
		return t, true
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo); ok {
		t.Proto, t.ID, t.Type = 58, ic.Identifier, layers.ICMPv6TypeEchoRequest
		return t, true
	}
	return t, false
}

// ctRequest is a ctnetlink request of type msg (ctMsgGet, ctMsgDelete)
// for the connection whose original direction is orig.
func ctRequest(msg uint16, seq uint32, orig ctTuple) []byte {
	family := byte(linuxAFInet)
	if orig.Src.Is6() {
		family = linuxAFInet6
	}
	body := []byte{family, 0, 0, 0} // nfgenmsg: family, version 0, res_id 0
	body = append(body, nlAttr(ctaTupleOrig|nlaNested, tupleAttrs(orig))...)
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(body))
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(nlmsgHdrLen+len(body))) //nolint:gosec // a few hundred bytes
	ne.PutUint16(b[4:], ctSubsys<<8|msg)
	ne.PutUint16(b[6:], nlmFRequest|nlmFAck)
	ne.PutUint32(b[8:], seq)
	return append(b, body...)
}

// tupleAttrs is a tuple's nested attributes: its addresses, then its
// protocol's.
func tupleAttrs(t ctTuple) []byte {
	var ip []byte
	if t.Src.Is6() {
		ip = append(nlAttr(ctaIPv6Src, t.Src.AsSlice()), nlAttr(ctaIPv6Dst, t.Dst.AsSlice())...)
	} else {
		ip = append(nlAttr(ctaIPv4Src, t.Src.AsSlice()), nlAttr(ctaIPv4Dst, t.Dst.AsSlice())...)
	}
	proto := nlAttr(ctaProtoNum, []byte{t.Proto})
	switch t.Proto {
	case 1:
		proto = append(proto, nlAttr(ctaICMPID, be16(t.ID))...)
		proto = append(proto, nlAttr(ctaICMPType, []byte{t.Type})...)
		proto = append(proto, nlAttr(ctaICMPCode, []byte{t.Code})...)
	case 58:
		proto = append(proto, nlAttr(ctaICMPv6ID, be16(t.ID))...)
		proto = append(proto, nlAttr(ctaICMPv6Type, []byte{t.Type})...)
		proto = append(proto, nlAttr(ctaICMPv6Code, []byte{t.Code})...)
	default:
		proto = append(proto, nlAttr(ctaSrcPort, be16(t.SrcPort))...)
		proto = append(proto, nlAttr(ctaDstPort, be16(t.DstPort))...)
	}
	return append(nlAttr(ctaTupleIP|nlaNested, ip), nlAttr(ctaTupleProto|nlaNested, proto)...)
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// nlAttr is one netlink attribute, padded to 4 bytes.
func nlAttr(typ uint16, value []byte) []byte {
	n := 4 + len(value)
	b := make([]byte, 4, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n)) //nolint:gosec // attributes here are short
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, value...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// errCTNotFound is the kernel's answer for a connection it does not track.
var errCTNotFound = errors.New("the kernel tracks no such connection")

// parseCTMessages reads a datagram of ctnetlink messages: the
// connections it holds, or the error the kernel answered with.
func parseCTMessages(b []byte) ([]ctEntry, error) {
	var out []ctEntry
	for len(b) >= nlmsgHdrLen {
		n := int(binary.NativeEndian.Uint32(b[0:]))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("a netlink message of length %d in %d bytes", n, len(b))
		}
		typ, data := binary.NativeEndian.Uint16(b[4:]), b[nlmsgHdrLen:n]
		b = b[min((n+3)&^3, len(b)):]
		switch {
		case typ == nlmsgError:
			if len(data) < 4 {
				return out, errors.New("a short netlink error")
			}
			switch code := int32(binary.NativeEndian.Uint32(data)); code { //nolint:gosec // the kernel's errno, negated
			case 0:
			case -linuxENOENT:
				return out, errCTNotFound
			default:
				// Linux's errno (the helper runs on Linux only).
				return out, fmt.Errorf("the kernel answered: %w", syscall.Errno(-code))
			}
		case typ == ctSubsys<<8|ctMsgNew && len(data) >= 4:
			e, err := parseCTEntry(data[4:])
			if err != nil {
				return out, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// parseCTEntry reads a connection's attributes.
func parseCTEntry(b []byte) (ctEntry, error) {
	var e ctEntry
	err := eachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case ctaTupleOrig:
			e.Orig, err = parseTuple(v)
		case ctaTupleReply:
			e.Reply, err = parseTuple(v)
		case ctaZone:
			if len(v) >= 2 {
				e.Zone = binary.BigEndian.Uint16(v)
			}
		}
		return err
	})
	if err == nil && (!e.Orig.Src.IsValid() || !e.Reply.Dst.IsValid()) {
		err = errors.New("a connection without both directions")
	}
	return e, err
}

func parseTuple(b []byte) (ctTuple, error) {
	var t ctTuple
	err := eachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case ctaTupleIP:
			return eachAttr(v, func(typ uint16, v []byte) error {
				a, _ := netip.AddrFromSlice(v)
				switch typ {
				case ctaIPv4Src, ctaIPv6Src:
					t.Src = a
				case ctaIPv4Dst, ctaIPv6Dst:
					t.Dst = a
				}
				return nil
			})
		case ctaTupleProto:
			return eachAttr(v, func(typ uint16, v []byte) error {
				switch {
				case len(v) == 0:
				case typ == ctaProtoNum:
					t.Proto = v[0]
				case typ == ctaICMPType || typ == ctaICMPv6Type:
					t.Type = v[0]
				case typ == ctaICMPCode || typ == ctaICMPv6Code:
					t.Code = v[0]
				case len(v) < 2:
				case typ == ctaSrcPort:
					t.SrcPort = binary.BigEndian.Uint16(v)
				case typ == ctaDstPort:
					t.DstPort = binary.BigEndian.Uint16(v)
				case typ == ctaICMPID || typ == ctaICMPv6ID:
					t.ID = binary.BigEndian.Uint16(v)
				}
				return nil
			})
		}
		return nil
	})
	return t, err
}

// eachAttr calls f for each netlink attribute in b, its type without the
// nested and byte-order flags.
func eachAttr(b []byte, f func(typ uint16, v []byte) error) error {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		if n < 4 || n > len(b) {
			return fmt.Errorf("a netlink attribute of length %d in %d bytes", n, len(b))
		}
		if err := f(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[4:n]); err != nil {
			return err
		}
		n = (n + 3) &^ 3
		if n > len(b) {
			n = len(b)
		}
		b = b[n:]
	}
	return nil
}
