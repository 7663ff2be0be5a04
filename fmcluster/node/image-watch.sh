#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# image-watch.sh: bring the cluster's training image to the nodes when the image build publishes it, and tell jobs how
# long until then. The cluster does not wait for the image build: nodes boot while it runs, and this watcher, on the
# head node (HyperPod's controller, PCS's login or head node), picks the image up as soon as it appears, and again
# whenever a rebuild (a version bump in the cluster file) changes it. No node is replaced for it.
#
# Usage: image-watch.sh install REGION IMAGE_PARAMETER MOUNT_POINT
#        image-watch.sh check REGION IMAGE_PARAMETER MOUNT_POINT
#
#   install  a systemd timer (fmcluster-image-watch.timer: 1 minute after boot, so at once when installed later,
#            then every 2 minutes) running `check`, and a login message (/etc/profile.d/fmcluster-image.sh, through
#            training-image.sh) while the image is not ready
#   check    reads the SSM parameter IMAGE_PARAMETER (/fmcluster/<cluster>/image-uri):
#            - set: imports it into MOUNT_POINT/enroot/images with import-image.sh when enroot is installed (once per
#              image; a changed parameter imports the new one and moves training-image.sqsh to it), else the nodes
#              pull it from ECR on first use; the status becomes `ready`
#            - not set: reads <IMAGE_PARAMETER's path>/image-build, which the image build writes while it runs (JSON:
#              state, build, started, expectedMinutes, logs); the status becomes `building` with the time the image
#              should be ready (start + expected minutes + IMPORT_MINUTES), or `failed`, or `waiting` (no build yet:
#              the image stack is still being deployed)
#            and writes MOUNT_POINT/enroot/images/training-image.status (KEY=value lines: state, image, uri, ready_at,
#            logs, checked), which training-image.sh reads for jobs on every node.
# Why a timer on the node and not an event: the node needs no inbound path (HyperPod nodes and PCS nodes without
# internet reach SSM through their VPC endpoint), the same script serves HyperPod and PCS, a node that was down when
# the image changed catches up on its next check, and a failed import is simply retried two minutes later.
# Log: /var/log/fmcluster/image-watch.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"
IMPORT="$HERE/hyperpod/import-image.sh" # one layout on every node (fmcluster.node_files)
# shellcheck source=hyperpod/ssm.sh
source "$HERE/hyperpod/ssm.sh"

IMPORT_MINUTES="${FMCLUSTER_IMAGE_IMPORT_MINUTES:-10}"
UNIT=fmcluster-image-watch

usage() {
  printf 'usage: %s install|check REGION IMAGE_PARAMETER MOUNT_POINT\n' "$0" >&2
  exit 2
}

# build_status JSON: "state ready_at logs" from the image-build parameter's JSON (python3: every node image has it).
build_status() {
  python3 -c '
import json, sys
try:
    build = json.loads(sys.argv[1])
    ready = int(build["started"]) + 60 * (int(build["expectedMinutes"]) + int(sys.argv[2]))
    print(build.get("state", "building"), ready, " ".join(str(build.get("logs", "")).split()) or "-")
except (ValueError, KeyError, TypeError) as error:
    sys.exit(f"unreadable image-build parameter: {error!r}")
' "$1" "$IMPORT_MINUTES"
}

# write_status DIR KEY=VALUE...: the status file jobs read, replaced atomically.
write_status() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  write_file "$dir/training-image.status" 0644 < <(printf '%s\n' "$@" "checked=$(date +%s)")
}

check() {
  local region="$1" parameter="$2" mount="$3" images uri build state ready_at logs
  images="$ROOT$mount/enroot/images"
  if ! uri="$(retry ssm_get "$region" "$parameter")"; then
    die "SSM parameter $parameter could not be read; trying again at the next check"
  fi
  if [[ -n "$uri" ]]; then
    if command -v enroot >/dev/null 2>&1 && [[ -f "$IMPORT" ]]; then
      if ! bash "$IMPORT" "$parameter" "$mount"; then
        write_status "$images" state=importing "uri=$uri" "ready_at=$(($(date +%s) + 60 * IMPORT_MINUTES))" \
          "logs=/var/log/fmcluster/import-image.log"
        die "the import of $uri did not finish; trying again at the next check"
      fi
      if [[ "$(cat "$images/training-image.uri" 2>/dev/null)" != "$uri" ]]; then
        # another node holds the import lock: it is not ready here until that node is done
        write_status "$images" state=importing "uri=$uri" "ready_at=$(($(date +%s) + 60 * IMPORT_MINUTES))" \
          "logs=/var/log/fmcluster/import-image.log on the importing node"
        log INFO "$uri is being imported by another node"
        return 0
      fi
      write_status "$images" state=ready "image=$mount/enroot/images/training-image.sqsh" "uri=$uri"
    else
      write_status "$images" state=ready "image=$uri" "uri=$uri" # pulled from ECR by each node on first use
    fi
    if ((FMC_CHANGED)); then
      log INFO "training image ready: $uri"
    fi
    return 0
  fi
  if ! build="$(retry ssm_get "$region" "${parameter%/*}/image-build")"; then
    die "SSM parameter ${parameter%/*}/image-build could not be read; trying again at the next check"
  fi
  if [[ -z "$build" ]]; then
    write_status "$images" state=waiting "logs=the image stack's CloudFormation events"
    log INFO "no training image and no build yet: the image stack is still being deployed"
    return 0
  fi
  read -r state ready_at logs < <(build_status "$build") || die "cannot read the image-build parameter: $build"
  write_status "$images" "state=$state" "ready_at=$ready_at" "logs=$logs"
  log INFO "training image $state; expected at $(date -u -d "@$ready_at" +%H:%MZ 2>/dev/null || echo "$ready_at"); logs: $logs"
}

install() {
  local region="$1" parameter="$2" mount="$3" arguments
  arguments="$(printf ' %q' "$region" "$parameter" "$mount")"
  write_file "$ROOT/etc/profile.d/fmcluster-image.sh" 0644 <<EOF
# fmcluster: say so at login while the training image is not ready (training-image.sh prints why and when)
if [ -x /opt/fmcluster/node/training-image.sh ]; then
  FMCLUSTER_IMAGE_STATUS=$(printf %q "$mount/enroot/images/training-image.status") \\
    /opt/fmcluster/node/training-image.sh >/dev/null || true
fi
EOF
  # OnBootSec has passed by now, so the timer runs its first check right away (systemd catches up elapsed timers)
  install_timed_service "$UNIT" "fmcluster: bring the training image to the nodes when it is published" \
    "/usr/bin/env bash /opt/fmcluster/node/image-watch.sh check$arguments" \
    "network-online.target remote-fs.target" \
    "fmcluster: check for a new training image every 2 minutes" OnBootSec=1min OnUnitActiveSec=2min
  log INFO "$UNIT.timer installed: checks $parameter now and every 2 minutes"
}

main() {
  (($# == 4)) || usage
  require_root
  case "$1" in
    install) install "$2" "$3" "$4" ;;
    check) check "$2" "$3" "$4" ;;
    *) usage ;;
  esac
}

main "$@"
