#!/usr/bin/env bash
# timed.sh PART CMD...: runs CMD and says how long PART took, pass or fail,
# so that a CI log shows what each part of `make test` costs.
set -uo pipefail
part=$1
shift
start=$(date +%s)
"$@"
rc=$?
printf '==== %s: %ss (%s)\n' "$part" "$(($(date +%s) - start))" "$([ $rc -eq 0 ] && echo ok || echo "failed, exit $rc")"
exit $rc
