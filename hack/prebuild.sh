#!/usr/bin/env bash
# prebuild.sh start|wait: `make test`'s cold builds in the background, at
# idle priority, while it lints, tests and runs the first e2e modes: the
# lab's cached dataplane builds (the OVS/OVN root, Antrea, OVN-Kubernetes),
# then every fuzz target's instrumented test binary (hack/fuzz.sh 1x: one
# input each, on the fuzzing toolchain), which the fuzz step after e2e
# then finds in the build cache.
#
# Cold, these builds cost 10 to 20 minutes of CPU on 2 cores; run in line,
# all of it adds to CI's time. Most of `make test`'s e2e time waits on
# pods, real traffic and timeouts with a core or more idle: a build at
# SCHED_IDLE (and the idle I/O class) takes only that idle time, and yields
# the CPU to everything else at once. Each dataplane build script holds a
# lock per cache (flock), so the mode that needs a build (its lab-up calls
# the same script) waits for the background one and then finds the
# binaries cached; a build that failed in the background is retried there,
# in line, with its error. Go's build cache is safe to share, so a fuzz
# binary still being built when the fuzz step starts is at worst built
# twice. Warm, every build is a cache hit and this costs little.
#
#   start: begin the builds; their output goes to bin/.prebuild/log.
#   wait:  wait for them, say how long they ran and with what result, and
#          print their log when they failed (exit 1 then).
#
# The builds stop when the make that started them ends (a failed `make
# test` leaves no build running): a watcher checks every 2 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
dir=$root/bin/.prebuild
builds=(test/lab/build-ovs-root.sh test/lab/build-antrea.sh test/lab/build-ovnk.sh "hack/fuzz.sh 1x")

case ${1:-} in
start)
  owner=${2:?usage: prebuild.sh start OWNER_PID}
  mkdir -p "$dir"
  rm -f "$dir/rc" "$dir/log"
  date +%s >"$dir/start"
  # Detached from the caller's output, so that nothing waits on its pipes.
  setsid bash -c '
    cd "$1"; dir=$2; owner=$3; shift 3
    (
      rc=0
      for b in "$@"; do
        echo "prebuild: $b" >>"$dir/log"
        # shellcheck disable=SC2086 # a build is a command and its arguments
        chrt --idle 0 ionice -c 3 $b >>"$dir/log" 2>&1 || { rc=$?; echo "prebuild: $b failed, exit $rc" >>"$dir/log"; break; }
      done
      echo "$rc" >"$dir/rc.tmp" && mv "$dir/rc.tmp" "$dir/rc"
    ) &
    job=$!
    while kill -0 "$job" 2>/dev/null; do
      if ! kill -0 "$owner" 2>/dev/null; then
        kill -- -"$$" 2>/dev/null
        exit 0
      fi
      sleep 2
    done
  ' prebuild "$root" "$dir" "$owner" "${builds[@]}" </dev/null >/dev/null 2>&1 &
  echo "prebuild: the cold builds (OVS/OVN root, Antrea, OVN-Kubernetes, fuzz binaries) run in the background at idle priority (log: bin/.prebuild/log)"
  ;;
wait)
  [ -f "$dir/start" ] || { echo "prebuild: none was started"; exit 0; }
  while [ ! -f "$dir/rc" ]; do
    # Gone without a result: it was stopped.
    if ! pgrep -f "prebuild $root" >/dev/null; then
      echo "prebuild: the background builds ended without a result" >&2
      cat "$dir/log" >&2 || true
      exit 1
    fi
    sleep 1
  done
  rc=$(cat "$dir/rc")
  echo "prebuild: the background builds ended $(($(stat -c %Y "$dir/rc") - $(cat "$dir/start")))s after they began, exit $rc"
  grep -E '^(built|building|prebuild|fuzz.sh)' "$dir/log" || true
  if [ "$rc" != 0 ]; then
    cat "$dir/log" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: prebuild.sh start OWNER_PID | wait" >&2
  exit 1
  ;;
esac
