#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# shared-dirs.sh: the directories on the shared file system every user writes in, made once by whichever node gets
# there first (mkdir is atomic on Lustre too), so that the first job runs without an administrator's command.
#
# Usage: shared-dirs.sh [MOUNT_POINT]
#
# MOUNT_POINT: where the file system is mounted (default SHARED_MOUNT, /fsx). The directories and their modes are
# lib.sh's SHARED_DIRECTORIES (`NAME=MODE` words, rendered from fmcluster.names.SHARED_DIRECTORIES): checkpoints,
# datasets and jobs, each 1777 as /tmp is: every user may make an entry of their own there (train.py writes
# checkpoints/<user>/<job>/), and the sticky bit keeps a user from removing or renaming another user's (chmod(2),
# S_ISVTX). Homes (MOUNT_POINT/home, 0755, each home 0700) are users.sh's.
#   missing          made with its mode, owned by root
#   0755, root's     given its mode: that is what mkdir makes under umask 022, and what a data repository link's
#                    directory gets when FSx makes it (unconfirmed), so nobody chose it
#   any other mode   kept, with one INFO line: an administrator chose it
#   not a directory  one ERROR line (as when mkdir fails); the others are still made (exit 1)
# Without a file system mounted at MOUNT_POINT (storage.lustre: none, or the mount failed) nothing is made, with a
# WARNING: a local directory there would make jobs (examples/jobs/train.sbatch) take this node's disk for a shared one.
#
# Idempotent. Log: /var/log/fmcluster/shared-dirs.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

UNCHOSEN_MODE=0755
UNCHOSEN_OWNER=0

usage() {
  printf 'usage: %s [MOUNT_POINT]\n' "$0" >&2
  exit 2
}

# same_mode A B: whether two octal modes (e.g. 755 and 0755) are the same.
same_mode() {
  (($((8#$1)) == $((8#$2))))
}

# ensure_directory MOUNT NAME MODE. Every command's failure is checked here: main calls it before `||`, where bash
# ignores errexit (bash manual, The Set Builtin, -e), so an unchecked chmod would fail and still be logged as done.
ensure_directory() {
  local mount="$1" name="$2" mode="$3" dir current owner error
  dir="$ROOT$mount/$name"
  if error="$(mkdir -m "$mode" "$dir" 2>&1)"; then
    log INFO "made $mount/$name (mode $mode)"
    return 0
  fi
  if [[ ! -e "$dir" && ! -L "$dir" ]]; then
    log ERROR "could not make $mount/$name: ${error#mkdir: }"
    return 1
  fi
  if [[ ! -d "$dir" || -L "$dir" ]]; then
    log ERROR "$mount/$name exists and is not a directory; users cannot write there until it is one (mode $mode)"
    return 1
  fi
  if ! current="$(stat -c %a "$dir")" || ! owner="$(stat -c %u "$dir")"; then
    log ERROR "could not read the mode of $mount/$name"
    return 1
  fi
  if same_mode "$current" "$mode"; then
    return 0
  fi
  if same_mode "$current" "$UNCHOSEN_MODE" && [[ "$owner" == "$UNCHOSEN_OWNER" ]]; then
    if ! error="$(chmod "$mode" "$dir" 2>&1)"; then
      log ERROR "$mount/$name: mode $mode not set (it stays 0755, root's): ${error#chmod: }"
      return 1
    fi
    log INFO "$mount/$name: mode $mode (it was 0755, root's)"
  else
    log INFO "$mount/$name keeps mode $(printf '%04o' "$((8#$current))") (uid $owner), chosen after it was made" \
      "(fmcluster's is $mode)"
  fi
}

main() {
  local mount="${1:-$SHARED_MOUNT}" word failed=0
  (($# <= 1)) || usage
  [[ "$mount" =~ $MOUNT_POINT_PATTERN ]] || usage
  require_root
  if ! mountpoint -q "$ROOT$mount" 2>/dev/null; then
    log WARN "no shared file system at $mount: no shared directories made (without one, give jobs a directory every" \
      "node shares: FMCLUSTER_SHARED_DIR, docs/first-job.md)"
    return 0
  fi
  for word in $SHARED_DIRECTORIES; do
    ensure_directory "$mount" "${word%%=*}" "${word#*=}" || failed=1
  done
  exit "$failed" # not `return`: lib.sh's ERR trap would log a second line for the same failure
}

main "$@"
