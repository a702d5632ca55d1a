#!/usr/bin/env bash
# fuzz.sh FUZZTIME: runs every Go fuzz target of the module, one
# `go test -fuzz` per target (Go fuzzes one target per invocation), each for
# FUZZTIME (30s, 3s, 1000x...). Seed corpora live in each package's
# testdata/fuzz/FuzzName/; a crash Go finds is written there as a new seed
# and fails the run (keep it with the fix).
#
# Targets are found twice, and the two lists must agree, so that none can be
# left out: by grep (every `func Fuzz` in a *_test.go file) and by
# `go test -list` (what the test binaries really hold). A target behind a
# build tag, or one grep misreads, fails the run before any fuzzing.
#
# Fuzzing runs on Go 1.27.3 (FUZZ_GOTOOLCHAIN), fetched once by the go command
# from the Go module proxy: the module's own Go, 1.26.8, has golang/go#75804,
# where the fuzz coordinator reports its own -fuzztime deadline as a failure
# ("context deadline exceeded", no crasher) when a worker is slow to stop.
# On a loaded machine that failed CI once (FuzzEscape). 1.27 has the fix
# (internal/fuzz's stop also accepts ctx.Err()); the rest of the build stays
# on 1.26.
set -euo pipefail
fuzztime=${1:?usage: hack/fuzz.sh FUZZTIME}
cd "$(dirname "$0")/.."
fuzzgo=${FUZZ_GOTOOLCHAIN:-go1.27.3}
echo "fuzz.sh: fuzzing with $(GOTOOLCHAIN=$fuzzgo go version)"
module=$(go list -m)

# "PKG NAME" per target, sorted: by grep...
grepped=$(git ls-files -co --exclude-standard '*_test.go' | xargs grep -H '^func Fuzz[A-Za-z0-9_]*(' |
  sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#; s#^[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#. \1#' | sort -u)
# ...and by the test binaries.
listed=$(go test -list '^Fuzz' ./... | awk -v m="$module" '
  /^Fuzz/ { names[++n] = $1; next }
  /^ok / { pkg = $2; sub("^" m, ".", pkg); for (i = 1; i <= n; i++) print pkg, names[i]; n = 0 }' | sort -u)
if [ "$grepped" != "$listed" ]; then
  echo "fuzz.sh: the fuzz targets in the sources and in the test binaries differ (a target behind a build tag is never fuzzed):" >&2
  diff <(echo "$grepped") <(echo "$listed") >&2 || true
  exit 1
fi
total=$(echo "$listed" | grep -c .)
echo "fuzz.sh: $total targets, $fuzztime each"

failed=()
ran=0
while read -r pkg name; do
  start=$(date +%s)
  if GOTOOLCHAIN=$fuzzgo go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz.$$.log 2>&1; then
    printf 'ok    %-45s %-28s %ss\n' "$pkg" "$name" "$(($(date +%s) - start))"
  else
    printf 'FAIL  %-45s %-28s %ss\n' "$pkg" "$name" "$(($(date +%s) - start))"
    cat /tmp/fuzz.$$.log
    failed+=("$pkg $name")
  fi
  ran=$((ran + 1))
done <<<"$listed"
rm -f /tmp/fuzz.$$.log

if [ "$ran" -ne "$total" ]; then
  echo "fuzz.sh: ran $ran of $total targets" >&2
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} of $total targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "new crashers, to keep as seeds with the fix:" >&2
  git status --porcelain -- '*testdata/fuzz/*' >&2
  exit 1
fi
echo "fuzz.sh: all $total targets ran $fuzztime without a failure"
