package cli

const traceLong = `Trace a packet from a pod or a node to a pod, a Service, a node or an IP address through the
Open vSwitch dataplane of the nodes on its way, and show what each node did
with it: forwarded, load-balanced, tunnelled, delivered, or dropped (by which
table, flow and NetworkPolicy rule).

SRC is a pod, or a node (helper engine: the probe leaves as the node's own
traffic does, from the address its kernel picks):
  NAME | pod/NAME | NAMESPACE/NAME | NAMESPACE/pod/NAME
  node/NAME
DST is a pod or a node (as above), a Service or an IP address:
  svc/NAME | service/NAME | NAMESPACE/svc/NAME
  10.96.0.10 | fd00::10
A name without a namespace is in the namespace of -n (or the kubeconfig
context's). To reach a pod in a namespace called "svc" or "pod", spell the
kind out: svc/pod/NAME.

Without --tcp, --udp or --icmp the probe is an ICMP echo request, except to
a Service, where it goes to the Service's first port with that port's
protocol. Nothing is created until SRC, DST and every flag check out.

Exit codes: 0 the verdict matches --expect; 1 bad usage or input (nothing was
created); 2 the packet was dropped or rejected, or did not match --expect;
3 the trace did not complete in time; 4 cluster or setup failure.`

const traceExamples = `  # Can pod-a reach pod-b on TCP 80? Where does the packet die?
  kubectl traceflow pod-a pod-b --tcp 80

  # A pod in another namespace, to a Service (its first port, or the one given)
  kubectl traceflow demo/pod-a svc/web
  kubectl traceflow -n demo pod-a other/svc/web --tcp 8080

  # UDP to an IP outside the cluster, from a fixed source port
  kubectl traceflow pod-a 192.0.2.10 --udp 53 --src-port 40000

  # From a node (as a kubelet probe goes), and to a node's address
  kubectl traceflow node/worker-1 pod-b --tcp 8080
  kubectl traceflow pod-a node/worker-2 --tcp 10250

  # IPv6 (implied by an IPv6 destination)
  kubectl traceflow pod-a pod-b --ipv6 --tcp 443
  kubectl traceflow pod-a fd00::10 --icmp

  # A TCP packet with other flags, a short TTL
  kubectl traceflow pod-a pod-b --tcp 80 --tcp-flags SYN,ACK --ttl 2

  # Trace the next real connection instead of a probe; only if it is dropped
  kubectl traceflow pod-a pod-b --tcp 80 --live --dropped-only --timeout 120s

  # In CI: exit 0 only if the packet is dropped (a NetworkPolicy works)
  kubectl traceflow pod-a pod-b --tcp 5432 --expect dropped -o json

  # Print the Traceflow object without creating anything
  kubectl traceflow pod-a pod-b --tcp 80 --dry-run -o yaml`
