#!/usr/bin/env bash
#
# training-image.sh: the training image a job should run, or why it is not there yet. For job scripts:
#
#     image="$(/opt/fmcluster/node/training-image.sh --wait 60)" || exit 0   # not ready: the reason is in the log
#     srun --container-image="$image" ...
#
# Usage: training-image.sh [--wait MINUTES]
#
# Reads the status image-watch.sh keeps on the shared file system (FMCLUSTER_IMAGE_STATUS, default
# /fsx/enroot/images/training-image.status). Ready: prints the image (the squashfs imported into /fsx, or the ECR
# image pyxis pulls on first use) and exits 0. Not ready: prints one line to stderr, e.g.
#     the training image is still building; ready in about 12 min; see CloudWatch Logs group ... stream ...
# and exits 3; with --wait it first checks again every 30 seconds for up to MINUTES. No status file (a node that
# image-watch.sh does not serve): exits 1 with a line saying so, so callers can fall back to the SSM parameter.
set -euo pipefail

STATUS="${FMCLUSTER_IMAGE_STATUS:-/fsx/enroot/images/training-image.status}"
POLL_SECONDS="${FMCLUSTER_IMAGE_POLL_SECONDS:-30}"

# status_line: "state|image|ready_at|logs" from the status file (only its known keys; the file is not run as code).
status_line() {
  local line state="" image="" ready_at="" logs=""
  while IFS= read -r line || [[ -n "$line" ]]; do
    case "${line%%=*}" in
      state) state="${line#*=}" ;;
      image) image="${line#*=}" ;;
      ready_at) ready_at="${line#*=}" ;;
      logs) logs="${line#*=}" ;;
    esac
  done <"$STATUS"
  printf '%s|%s|%s|%s\n' "$state" "$image" "$ready_at" "$logs"
}

# reason STATE READY_AT LOGS: the one line that says why there is no image yet.
reason() {
  local minutes
  case "$1" in
    building | importing)
      minutes=$((($2 - $(date +%s) + 59) / 60))
      if ((minutes < 1)); then
        minutes=1 # overdue: it should be moments away
      fi
      if [[ "$1" == building ]]; then
        printf 'the training image is still building; ready in about %d min; see %s\n' "$minutes" "$3"
      else
        printf 'the training image is being imported into the file system; ready in about %d min; see %s\n' \
          "$minutes" "$3"
      fi
      ;;
    failed) printf 'the training image build failed; fix it and deploy again; see %s\n' "$3" ;;
    waiting) printf 'the training image build has not started yet (the image stack is still deploying); see %s\n' "$3" ;;
    *) printf 'the training image is not ready (status %s in %s)\n' "${1:-unknown}" "$STATUS" ;;
  esac
}

main() {
  local wait_minutes=0 deadline state image ready_at logs
  while (($#)); do
    case "$1" in
      --wait)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || { printf 'usage: %s [--wait MINUTES]\n' "$0" >&2; exit 2; }
        wait_minutes="$2"
        shift 2
        ;;
      *) printf 'usage: %s [--wait MINUTES]\n' "$0" >&2; exit 2 ;;
    esac
  done
  if [[ ! -r "$STATUS" ]]; then
    printf 'no training image status at %s: this node is not served by image-watch.sh\n' "$STATUS" >&2
    exit 1
  fi
  deadline=$(($(date +%s) + 60 * wait_minutes))
  while true; do
    IFS='|' read -r state image ready_at logs < <(status_line)
    if [[ "$state" == ready && -n "$image" ]]; then
      printf '%s\n' "$image"
      exit 0
    fi
    if (($(date +%s) >= deadline)); then
      reason "$state" "${ready_at:-0}" "${logs:--}" >&2
      exit 3
    fi
    reason "$state" "${ready_at:-0}" "${logs:--}" >&2
    sleep "$POLL_SECONDS"
  done
}

main "$@"
