#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# bootstrap.sh: prepare a training node: local NVMe scratch, the shared Lustre file system, the NCCL environment.
#
# Usage: bootstrap.sh [--lustre-dns-name DNS_NAME --lustre-mount-name MOUNT_NAME [--lustre-mount-point DIR]
#                      [--lustre-efa]] [--nccl-parameter SSM_PARAMETER_NAME]
#
# Runs, in this order, each as its own process with its own log under /var/log/fmcluster/:
#   1. nvme-raid.sh                                    /scratch on the instance-store NVMe disks
#   2. mount-lustre.sh DNS MOUNT_NAME [DIR] [--efa]    only when --lustre-dns-name is given
#   3. nccl-env.sh [SSM_PARAMETER_NAME]                /etc/profile.d/fmcluster-nccl.sh, /etc/fmcluster/nccl.env
# A step that fails does not stop the later ones (a node without scratch can still train from Lustre); the
# script exits 1 at the end, naming every step that failed. Each step is idempotent, so running it again is safe.
# Log: /var/log/fmcluster/bootstrap.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  printf 'usage: %s [--lustre-dns-name DNS --lustre-mount-name NAME [--lustre-mount-point DIR] [--lustre-efa]]' "$0" >&2
  printf ' [--nccl-parameter NAME]\n' >&2
  exit 2
}

main() {
  local dns_name="" mount_name="" mount_point="/fsx" efa=0 parameter="" status step
  local -a failed=() lustre_args nccl_args=()
  while (($#)); do
    case "$1" in
      --lustre-dns-name | --lustre-mount-name | --lustre-mount-point | --nccl-parameter)
        (($# >= 2)) || usage
        case "$1" in
          --lustre-dns-name) dns_name="$2" ;;
          --lustre-mount-name) mount_name="$2" ;;
          --lustre-mount-point) mount_point="$2" ;;
          --nccl-parameter) parameter="$2" ;;
        esac
        shift 2
        ;;
      --lustre-efa)
        efa=1
        shift
        ;;
      *) usage ;;
    esac
  done
  if [[ -n "$dns_name" && -z "$mount_name" ]] || [[ -z "$dns_name" && -n "$mount_name" ]]; then
    die "--lustre-dns-name and --lustre-mount-name go together; got only one"
  fi
  require_root
  log INFO "bootstrap starts"

  local -a steps=(nvme-raid)
  if [[ -n "$dns_name" ]]; then
    steps+=(mount-lustre)
    lustre_args=("$dns_name" "$mount_name" "$mount_point")
    if ((efa)); then
      lustre_args+=(--efa)
    fi
  fi
  steps+=(nccl-env)
  if [[ -n "$parameter" ]]; then
    nccl_args=("$parameter")
  fi

  for step in "${steps[@]}"; do
    log INFO "running $step"
    status=0
    case "$step" in
      nvme-raid) "$SCRIPT_DIR/nvme-raid.sh" || status=$? ;;
      mount-lustre) "$SCRIPT_DIR/mount-lustre.sh" "${lustre_args[@]}" || status=$? ;;
      nccl-env) "$SCRIPT_DIR/nccl-env.sh" ${nccl_args[@]+"${nccl_args[@]}"} || status=$? ;;
    esac
    if ((status == 0)); then
      log INFO "$step done"
    else
      log ERROR "$step failed with exit status $status (see $LOG_DIR/$step.log)"
      failed+=("$step")
    fi
  done

  if ((${#failed[@]})); then
    die "bootstrap finished with failures: ${failed[*]}"
  fi
  log INFO "bootstrap finished"
}

main "$@"
