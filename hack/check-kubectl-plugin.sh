#!/usr/bin/env bash
# Done-when 1 and 3 of issue 2 with the binary `make build` writes: puts bin/
# on PATH behind the real kubectl, checks `kubectl traceflow --help`, and that
# usage errors exit 1 in under a second while the kubeconfig points at an API
# server that never answers (and that nothing connects to it).
set -euo pipefail
cd "$(dirname "$0")/.."
make build
KUBECTL_TRACEFLOW_BIN="$PWD/bin/kubectl-traceflow" \
	go test -count=1 -v -run 'TestThroughRealKubectl' ./cmd/kubectl-traceflow/
