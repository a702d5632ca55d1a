# shellcheck shell=bash
# fixture FILE: the path of FILE under the team's fixtures, which sit beside
# the checkout (../shared from the main worktree, ../../shared from a worktree
# below it, /work/shared for a clone elsewhere, as CI's is); the first
# candidate when none holds it, for the caller's error. Needs $root.
fixture() {
  local d f=
  for d in "$root/../shared" "$root/../../shared" /work/shared; do
    f=$d/fixtures/$1
    [ -e "$f" ] && break
  done
  echo "$f"
}
