package tracer

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// kernelConnWait bounds the wait, once the probe has left OVS into the
// node's stack, for the kernel to start tracking its connection: the
// kernel does so as it takes the packet, well within it.
const kernelConnWait = time.Second

// intoKernel says whether verdict v sends the probe into the node's own
// network stack: out of the pod network through an internal port
// (Antrea's antrea-gw0, OVN-Kubernetes' management port), where the
// node's iptables may translate it on its way out.
func intoKernel(v Verdict) bool {
	return v.Action.Normalize() == report.ActionForwardedOutOfNetwork && v.Port != nil && v.Port.Type == "internal"
}

// watchKernel starts watching the kernel's new connections, before the
// probe is injected, where OVS's trace t says the probe leaves into the
// node's stack. Where the kernel cannot be watched, the trace goes on
// without and says nothing of a translation there.
func (s *session) watchKernel(t ofproto.Trace) {
	if _, v := Final(t, s.br); !intoKernel(v) {
		return
	}
	k, err := openKernelCT()
	if err != nil {
		s.c.Logf("the probe leaves into the node's own stack, whose connection tracking cannot be read (%v): a translation there is not reported", err)
		return
	}
	s.kernel = k
}

// kernelTranslation reads the connection the node's kernel tracks for the
// probe, as frame shows it leaving OVS into the node's stack, and puts the
// address the kernel translated its source to (the node's masquerade) in
// o. It returns what the explanation says of it.
func (s *session) kernelTranslation(o *report.Observation, frame []byte) string {
	orig, ok := frameTuple(frame)
	if s.kernel == nil || !ok {
		return ""
	}
	e, made, err := s.kernel.probeConn(orig, time.Now().Add(kernelConnWait))
	if err != nil {
		s.c.Logf("the node's kernel: no tracked connection for the probe (%s): %v", orig, err)
		return fmt.Sprintf("; the node's kernel tracks no connection for it (%v), so whether it translated the probe is not known", err)
	}
	if made {
		s.kernelConn = &e.Orig
	}
	s.c.Logf("the node's kernel tracks the probe as %s, answered as %s", e.Orig, e.Reply)
	if !e.SourceTranslated() {
		return fmt.Sprintf("; the node's kernel passes it on untranslated (its connection tracking: %s)", e.Orig)
	}
	o.TranslatedSrcIP = e.Reply.Dst.String()
	to := e.Reply.Dst.String()
	if e.Orig.Proto == 6 || e.Orig.Proto == 17 {
		to = netip.AddrPortFrom(e.Reply.Dst, e.Reply.DstPort).String()
	}
	return fmt.Sprintf("; the node's kernel translated its source to %s (SNAT, from its connection tracking: the answer comes back as %s)", to, e.Reply)
}

// forgetKernelConn closes the watch of the kernel and deletes the
// connection the probe made there, if the helper saw it made: nothing of
// the trace stays in the node's connection tracking.
func (s *session) forgetKernelConn() {
	if s.kernel == nil {
		return
	}
	s.kernel.Close()
	if s.kernelConn != nil {
		if _, err := ctQuery(ctMsgDelete, *s.kernelConn); err != nil && !errors.Is(err, errCTNotFound) {
			s.c.Logf("cleanup: delete the probe's connection %s from the node's kernel: %v (it expires by itself)", s.kernelConn, err)
		}
	}
}
