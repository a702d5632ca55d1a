# shellcheck shell=bash
# Teardown: every process, mount, namespace, interface, cgroup, sysctl and
# host directory the lab made, in any mode, also after a crash.
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here.

# ---------------------------------------------------------------- teardown
lab_pids() {
  local f p
  for f in /sys/fs/cgroup/pids/$CG /sys/fs/cgroup/freezer/$CG; do
    [ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  # Strays outside the cgroup: anything in a node's network namespace.
  local ino=() n
  for n in /run/netns/tf-node-*; do ino+=("$(stat -Lc %i "$n" 2>/dev/null)"); done
  if [ ${#ino[@]} -gt 0 ]; then
    for p in /proc/[0-9]*; do
      n=$(stat -Lc %i "$p/ns/net" 2>/dev/null) || continue
      for i in "${ino[@]}"; do [ "$n" = "$i" ] && echo "${p#/proc/}"; done
    done
  fi
}

down() {
  [ "$(id -u)" -eq 0 ] || die "the lab needs root"
  local t0=$SECONDS end=$((SECONDS + 20)) pids
  # Freeze first so that nothing forks while being killed.
  [ -d /sys/fs/cgroup/freezer/$CG ] && echo FROZEN >/sys/fs/cgroup/freezer/$CG/freezer.state 2>/dev/null || true
  while pids=$(lab_pids | sort -u | grep -v "^$$\$" || true); [ -n "$pids" ]; do
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    [ -d /sys/fs/cgroup/freezer/$CG ] && echo THAWED >/sys/fs/cgroup/freezer/$CG/freezer.state 2>/dev/null || true
    [ $SECONDS -lt $end ] || { log "processes still alive: $pids"; break; }
    sleep 0.1
  done
  # Killed processes linger as zombies until reaped; wait for them to go.
  poll "killed lab processes to be reaped" 10 bash -c "! grep -qs ':/$CG/' /proc/[0-9]*/cgroup" || true
  local f
  for f in "$S"/ns/*.mnt "$S"/ns/*.uts; do umount -l "$f" 2>/dev/null || true; done
  mountpoint -q "$S/ns" 2>/dev/null && umount -l "$S/ns"
  for f in /run/netns/tf-node-*; do ip netns del "$(basename "$f")" 2>/dev/null || true; done
  for f in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^(tfv[0-9]+|$HOSTBR)\$"); do
    ip link del "$f" 2>/dev/null || true
  done
  # Cgroups bottom-up; a dying process may hold one for a moment.
  local h d
  for h in $(cgroup_hier); do
    [ -d "$h/$CG" ] || continue
    while [ -d "$h/$CG" ]; do
      find "$h/$CG" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$h/$CG" ] || break
      [ $SECONDS -lt $end ] || { log "cgroup $h/$CG still busy"; break; }
      sleep 0.1
    done
  done
  if [ -f "$S/sysctls" ]; then
    while read -r s v; do echo "$v" >"/proc/sys/$s" 2>/dev/null || true; done <"$S/sysctls"
  fi
  if [ -f "$S/host-dirs" ]; then
    while read -r d; do rmdir "$d" 2>/dev/null || true; done < <(sort -ru "$S/host-dirs")
  fi
  # The logs outlive the lab, one copy per mode, replaced by the next
  # down: a failure seen in CI can be read after the lab is gone.
  if [ -d "$S/logs" ]; then
    local mode=${RUNNING_CNI:-$CNI}
    rm -rf "${LOGKEEP:?}/$mode" && mkdir -p "$LOGKEEP" && cp -r "$S/logs" "$LOGKEEP/$mode" &&
      log "the lab's logs are kept in $LOGKEEP/$mode"
  fi
  rm -rf "$S"
  log "lab down in $((SECONDS - t0))s"
}
