#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# bootstrap.sh: prepare a training node: local NVMe scratch, the shared Lustre file system, the NCCL environment,
# and, given the node bundle, fmcluster's other node files and the metrics collectors.
#
# Usage: bootstrap.sh [--lustre-dns-name DNS_NAME --lustre-mount-name MOUNT_NAME [--lustre-mount-point DIR]
#                      [--lustre-efa]] [--nccl-parameter SSM_PARAMETER_NAME] [--slurm-version VERSION]
#                     [--bundle S3_URI [--image-parameter SSM_PARAMETER_NAME]
#                      [--observability OBSERVABILITY_ARGUMENTS...]]
#
# Runs, in this order, each as its own process with its own log under /var/log/fmcluster/:
#   1. nvme-raid.sh                                    /scratch on the instance-store NVMe disks
#   2. bundle                                          only with --bundle (in this process; log: bootstrap.log):
#      the node bundle, a zip laid out as /opt/fmcluster is (node/*.sh with observability.sh, lnet-efa.sh and
#      image-watch.sh, dashboards/, nccl-tests.sbatch), fetched with `aws s3 cp` (retried with backoff, in the region
#      instance metadata names) and unpacked into /opt/fmcluster with unzip, or `python3 -m zipfile` where unzip is
#      missing. Each file is replaced by a rename, so a script that is running (this one) keeps reading its old copy.
#   3. mount-lustre.sh DNS MOUNT_NAME [DIR] [--efa]    only when --lustre-dns-name is given (LNet over EFA needs
#      lnet-efa.sh from the bundle; without it, TCP)
#   4. nccl-env.sh [SSM_PARAMETER_NAME]                /etc/fmcluster/nccl.env and where jobs and containers read it
#   5. enroot-pyxis.sh (from the bundle): enroot and pyxis, installed when the image lacks them (the AWS PCS sample
#      AMIs do), configured for EFA, caches on /scratch
#   6. slurm-hooks.sh (from the bundle): on AWS PCS (configless Slurm; Prolog/Epilog come from the cluster's Slurm
#      custom settings) it only warns that PCS takes no TaskProlog
#   7. image-watch.sh install REGION SSM_PARAMETER_NAME MOUNT_POINT   only with --image-parameter (and the bundle): a
#      timer that brings the training image to the file system when it is published (see image-watch.sh's header)
#   8. observability.sh OBSERVABILITY_ARGUMENTS...    only with --observability, whose arguments are every one after
#      it (see observability.sh's header); run from /opt/fmcluster/node, so it needs the bundle step, with this
#      image's Slurm bin/ (/opt/aws/pcs/scheduler/slurm-<version>/bin on PCS, on PATH for login shells only) first on
#      PATH for the Slurm exporter.
# A step that fails does not stop the later ones. What a node cannot train without fails it: nvme-raid, mount-lustre
# (no /fsx), nccl-env, bundle, enroot; the script exits 1 at the end with one line naming those steps and the log.
# slurm-hooks, image-watch (the image is not on the boot path: jobs pull it from ECR) and observability only warn, in
# one line naming the step, what follows and its log. Steps that run from the bundle are skipped (and named) when it
# could not be installed. Each step is idempotent.
# --slurm-version: the cluster's Slurm version (AWS PCS); every step then uses that version's Slurm of the image
# (/opt/aws/pcs/scheduler/slurm-VERSION: pyxis is built against it, the exporters find its bin/), not the newest.
# Log: /var/log/fmcluster/bootstrap.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUNDLE_DIR="$ROOT/opt/fmcluster"
shopt -s globstar nullglob

usage() {
  printf 'usage: %s [--lustre-dns-name DNS --lustre-mount-name NAME [--lustre-mount-point DIR] [--lustre-efa]]' "$0" >&2
  printf ' [--nccl-parameter NAME] [--slurm-version VERSION]' >&2
  printf ' [--bundle S3_URI [--image-parameter NAME] [--observability ARGUMENTS...]]\n' >&2
  exit 2
}

# unpack_bundle S3_URI DIR: the bundle from S3 into DIR/bundle.zip, unpacked into DIR/files, then moved file by file
# into BUNDLE_DIR. Every command is checked: the caller's `||` turns off set -e in here.
unpack_bundle() {
  local uri="$1" tmp="$2" region file name mode
  region="$(imds meta-data/placement/region)" || return 1
  retry aws s3 cp --only-show-errors --region "$region" "$uri" "$tmp/bundle.zip" || return 1
  if command -v unzip >/dev/null 2>&1; then
    unzip -q "$tmp/bundle.zip" -d "$tmp/files" || return 1
  else
    python3 -m zipfile -e "$tmp/bundle.zip" "$tmp/files" || return 1
  fi
  if [[ ! -f "$tmp/files/node/observability.sh" ]]; then
    log ERROR "$uri is no fmcluster node bundle (no node/observability.sh in it)"
    return 1
  fi
  for file in "$tmp"/files/**; do
    [[ -f "$file" ]] || continue
    name="${file#"$tmp/files/"}"
    mode=0644
    if [[ "$name" == node/*.sh && "$name" != node/lib.sh ]] || [[ "$name" == *.sbatch ]]; then
      mode=0755
    fi
    mkdir -p "$(dirname "$BUNDLE_DIR/$name")" && chmod "$mode" "$file" && mv -f "$file" "$BUNDLE_DIR/$name" || return 1
  done
  log INFO "node bundle $uri unpacked into ${BUNDLE_DIR#"$ROOT"}"
}

# install_bundle S3_URI: unpack_bundle in a fresh directory beside BUNDLE_DIR (so the renames stay on one file
# system), removed afterwards whatever happened.
install_bundle() {
  local tmp status=0
  mkdir -p "$BUNDLE_DIR" && tmp="$(mktemp -d "$BUNDLE_DIR/.bundle.XXXXXX")" || return 1
  unpack_bundle "$1" "$tmp" || status=$?
  rm -rf "$tmp"
  return "$status"
}

main() {
  local dns_name="" mount_name="" mount_point="/fsx" efa=0 parameter="" bundle="" observability=0 status step step_log
  local image_parameter=""
  local -a failed=() failed_logs=() lustre_args nccl_args=() observability_args=()
  while (($#)); do
    case "$1" in
      --lustre-dns-name | --lustre-mount-name | --lustre-mount-point | --nccl-parameter | --bundle | --image-parameter | \
        --slurm-version)
        (($# >= 2)) || usage
        case "$1" in
          --lustre-dns-name) dns_name="$2" ;;
          --lustre-mount-name) mount_name="$2" ;;
          --lustre-mount-point) mount_point="$2" ;;
          --nccl-parameter) parameter="$2" ;;
          --bundle) bundle="$2" ;;
          --image-parameter) image_parameter="$2" ;; # image-watch.sh (from the bundle) on this node
          --slurm-version) export FMCLUSTER_SLURM_VERSION="$2" ;; # lib.sh's slurm_prefixes, in every step
        esac
        shift 2
        ;;
      --lustre-efa)
        efa=1
        shift
        ;;
      --observability)
        observability=1
        shift
        observability_args=("$@")
        break
        ;;
      *) usage ;;
    esac
  done
  if [[ -n "$dns_name" && -z "$mount_name" ]] || [[ -z "$dns_name" && -n "$mount_name" ]]; then
    die "--lustre-dns-name and --lustre-mount-name go together; got only one"
  fi
  if [[ -n "$bundle" && ! "$bundle" =~ ^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^[:space:]]+$ ]]; then
    die "--bundle must be the S3 URI of the node bundle like s3://bucket/bundle.zip; got '$bundle'"
  fi
  if ((observability)) && [[ -z "$bundle" ]]; then
    die "--observability needs --bundle: observability.sh and its dashboards come in the node bundle"
  fi
  require_root
  log INFO "bootstrap starts"

  local -a steps=(nvme-raid)
  if [[ -n "$bundle" ]]; then
    steps+=(bundle) # first: mount-lustre takes lnet-efa.sh from it
  fi
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
  if [[ -n "$bundle" ]]; then
    steps+=(enroot slurm-hooks)
  fi
  if [[ -n "$bundle" && -n "$image_parameter" ]]; then
    steps+=(image-watch)
  fi
  if ((observability)); then
    steps+=(observability)
  fi

  for step in "${steps[@]}"; do
    if [[ "$step" =~ ^(enroot|slurm-hooks|image-watch|observability)$ && " ${failed[*]} " == *" bundle "* ]]; then
      log ERROR "$step skipped: it runs from the node bundle, which could not be installed"
      [[ "$step" == enroot ]] && failed+=(enroot)
      continue
    fi
    log INFO "running $step"
    status=0
    case "$step" in
      nvme-raid) "$SCRIPT_DIR/nvme-raid.sh" || status=$? ;;
      mount-lustre) "$SCRIPT_DIR/mount-lustre.sh" "${lustre_args[@]}" || status=$? ;;
      nccl-env) "$SCRIPT_DIR/nccl-env.sh" ${nccl_args[@]+"${nccl_args[@]}"} || status=$? ;;
      bundle) install_bundle "$bundle" || status=$? ;;
      enroot) "$BUNDLE_DIR/node/enroot-pyxis.sh" || status=$? ;;
      slurm-hooks) "$BUNDLE_DIR/node/slurm-hooks.sh" || status=$? ;;
      image-watch)
        "$BUNDLE_DIR/node/image-watch.sh" install "$(imds meta-data/placement/region)" "$image_parameter" \
          "$mount_point" || status=$?
        ;;
      observability)
        PATH="$ROOT$(slurm_prefix)/bin:$PATH" "$BUNDLE_DIR/node/observability.sh" \
          ${observability_args[@]+"${observability_args[@]}"} || status=$?
        ;;
    esac
    if ((status == 0)); then
      log INFO "$step done"
      continue
    fi
    step_log="$LOG_DIR/$step.log"
    if [[ "$step" == bundle ]]; then
      step_log="$LOG_FILE" # the bundle step runs in this process
    fi
    case "$step" in # none of these keeps a node from serving jobs
      observability)
        log WARN "fmcluster bootstrap WARNING: step observability failed; the node runs without metrics" \
          "(log: ${step_log#"$ROOT"})"
        continue
        ;;
      slurm-hooks)
        log WARN "fmcluster bootstrap WARNING: step slurm-hooks failed; jobs get the submitter's environment" \
          "(log: ${step_log#"$ROOT"})"
        continue
        ;;
      image-watch)
        log WARN "fmcluster bootstrap WARNING: step image-watch failed; jobs pull the training image from ECR" \
          "(log: ${step_log#"$ROOT"})"
        continue
        ;;
    esac
    log ERROR "$step failed with exit status $status (see ${step_log#"$ROOT"})"
    failed+=("$step")
    failed_logs+=("${step_log#"$ROOT"}")
  done

  if ((${#failed[@]})); then
    die "fmcluster bootstrap FAILED at ${failed[*]} (logs: ${failed_logs[*]:-${LOG_FILE#"$ROOT"}})"
  fi
  log INFO "bootstrap finished"
}

main "$@"
