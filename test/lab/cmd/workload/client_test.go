package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestClassify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_, dlErr := (&net.Dialer{}).DialContext(ctx, "tcp", "192.0.2.1:80")
	for _, c := range []struct {
		name string
		err  error
		want Outcome
		ok   bool
	}{
		{"nil", nil, Served, true},
		{"rst", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Refused, true},
		{"admin prohibited", fmt.Errorf("x: %w", syscall.EHOSTUNREACH), Refused, true},
		{"icmp echo unreachable", errUnreachable{code: 13}, Refused, true},
		{"deadline", dlErr, TimedOut, true},
		{"other", errors.New("no such host"), "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, ok := classify(c.err); got != c.want || ok != c.ok {
				t.Errorf("classify(%v) = %q, %v; want %q, %v", c.err, got, ok, c.want, c.ok)
			}
		})
	}
}

func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	sb := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return sb.Bytes()
}

func TestMatchEcho(t *testing.T) {
	req, err := echoRequest(7, 1)
	if err != nil {
		t.Fatal(err)
	}
	quoted := serialize(t, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4,
		SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}, gopacket.Payload(req))
	unreach := func(id uint16) []byte {
		q := quoted
		if id != 7 {
			other, _ := echoRequest(id, 1)
			q = append(append([]byte{}, quoted[:20]...), other...)
		}
		return serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, 13)}, gopacket.Payload(q))
	}
	reply := func(id, seq uint16) []byte {
		return serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0), Id: id, Seq: seq})
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want *echoMatch
	}{
		{"our reply", reply(7, 1), &echoMatch{reply: true}},
		{"another ping's reply", reply(8, 1), nil},
		{"our own request (loopback)", req, nil},
		{"unreachable about ours", unreach(7), &echoMatch{code: 13}},
		{"unreachable about another", unreach(9), nil},
		{"garbage", []byte{1}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := matchEcho(c.msg, 7, 1)
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("matchEcho = %+v, want %+v", got, c.want)
			}
		})
	}
}
