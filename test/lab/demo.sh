#!/usr/bin/env bash
# The demo (make demo): in the running lab, set up kubectl-traceflow (install), deploy
# pod-a, pod-b, pod-c, a Service and a NetworkPolicy, and trace through the
# real kubectl: pod-a -> pod-b on TCP 80 across the two nodes (delivered),
# then pod-a -> pod-c, which the NetworkPolicy drops.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export KUBECONFIG=${KUBECONFIG:-/run/traceflow-lab/kubeconfig}
export PATH=$root/bin:$PATH

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

kubectl traceflow install   # as the lab's admin: CRD, namespace traceflow-system, roles
kubectl apply -f "$root/test/lab/demo/demo.yaml" >/dev/null
kubectl wait --for=condition=Ready pod/pod-a pod/pod-b pod/pod-c --timeout=120s >/dev/null

cni=$(cat "${TFLAB_STATE:-/run/traceflow-lab}/cni" 2>/dev/null || echo lab)
if [ "$cni" = ovn ]; then
  # OVN mode: real OVN shaped as OVN-Kubernetes. Real traffic first, then
  # the same flows traced; the hops are named by OVN's logical flows (stage
  # and datapath), the drop by the ACL's stage and the NetworkPolicy.
  ip_b=$(kubectl get pod pod-b -o jsonpath='{.status.podIP}')
  ip_c=$(kubectl get pod pod-c -o jsonpath='{.status.podIP}')
  say "kubectl exec pod-a -- /workload get http://$ip_b/   # real traffic over OVN"
  kubectl exec pod-a -- /workload get -timeout 2s "http://$ip_b/"
  say "kubectl exec pod-a -- /workload get http://$ip_c/   # the NetworkPolicy's ACL drops it"
  kubectl exec pod-a -- /workload get -timeout 2s "http://$ip_c/" || true
fi

say "kubectl traceflow pod-a pod-b --tcp 80"
kubectl traceflow pod-a pod-b --tcp 80

say "kubectl traceflow pod-a svc/web --keep -o wide   # kept: the record holds the merged per-node results"
kubectl traceflow pod-a svc/web --keep -o wide
say "kubectl get traceflows -o yaml"
kubectl get traceflows -o yaml

say "kubectl traceflow pod-a pod-c --tcp 80   # NetworkPolicy deny-locked: exit code 2"
rc=0
kubectl traceflow pod-a pod-c --tcp 80 || rc=$?
[ "$rc" -eq 2 ] || { echo "demo: the dropped trace exited $rc, expected 2" >&2; exit 1; }
echo "exit code $rc: dropped, as the policy says"
