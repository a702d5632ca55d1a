#!/usr/bin/env bash
# The demo (make demo): in the running lab, install the Traceflow CRD, deploy
# pod-a, pod-b, pod-c, a Service and a NetworkPolicy, and trace through the
# real kubectl: pod-a -> pod-b on TCP 80 across the two nodes (delivered),
# then pod-a -> pod-c, which the NetworkPolicy drops.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export KUBECONFIG=${KUBECONFIG:-/run/traceflow-lab/kubeconfig}
export PATH=$root/bin:$PATH

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

kubectl traceflow install-crd
kubectl apply -f "$root/test/lab/demo/demo.yaml" >/dev/null
kubectl wait --for=condition=Ready pod/pod-a pod/pod-b pod/pod-c --timeout=120s >/dev/null

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
