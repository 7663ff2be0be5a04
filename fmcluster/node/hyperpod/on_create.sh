#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# on_create.sh: SageMaker HyperPod's OnCreate lifecycle script for an fmcluster cluster. HyperPod runs it as root on
# every node as the node joins the cluster (creation, replacement of a faulty node, scale-up).
#
# Usage: on_create.sh
#
# Steps, in this order, each a process of its own:
#   hold     slurm-hold.sh hold, on every node but the controller: the node is drained in Slurm until the lifecycle
#            ends (HyperPod runs this script as OnInitComplete, after its own Slurm set-up: slurmd may have registered
#            and could be given jobs); at the end `release` resumes it, or `fail` keeps it drained naming the failed
#            steps. Draining changes slurmctld's node state only, never slurm.conf (HyperPod's; slurm-hooks.sh)
#   install  copy fmcluster's node scripts to /opt/fmcluster/node (the /scratch boot unit runs nvme-raid.sh from
#            there), the dashboards folder to /opt/fmcluster/dashboards, nccl-tests.sbatch to /opt/fmcluster/
#   scratch  nvme-raid.sh: /scratch on the instance-store NVMe disks (nothing to do on types without them)
#   nccl     nccl-env.sh <FMCLUSTER_NCCL_PREFIX>/<instance group>/nccl-env: the NCCL/libfabric environment of jobs
#            (nccl-env.sh's defaults alone when the group has no such parameter)
#   enroot   enroot-pyxis.sh: enroot and pyxis (installed when the image lacks them), caches on local disk
#   slurm-hooks  slurm-hooks.sh: TaskProlog (NCCL environment in every job) and Prolog/Epilog (GPU-to-job files for
#            dcgm-exporter) in this node's slurm.conf
#   users    only with FMCLUSTER_USERS_PARAMETER: users.sh sync <it>: the cluster file's users (same uid and gid on
#            every node, homes on the file system, keys, sudo for admins; users.sh's header)
#   accounting  on the controller (where HyperPod runs slurmdbd), with FMCLUSTER_USERS_PARAMETER: users.sh sync <it>
#            --accounting <cluster>: each user's Slurm association in the account named after the cluster
#   image    import-image.sh, on the controller only: the training image, once, as a squashfs on the file system
#   image-watch  image-watch.sh install, on the controller only: a timer that imports the image when it is published
#            (usually after boot: the cluster does not wait for the image build) or changed, for jobs to find
#   observability  only when FMCLUSTER_PROMETHEUS is `managed`: observability.sh --cluster --region
#            --endpoint-parameter FMCLUSTER_ENDPOINT_PARAMETER --config-dir /opt/fmcluster/dashboards
#            [--mirror FMCLUSTER_MIRROR], with --head-node on the controller (the Slurm exporter, which finds sinfo in
#            /opt/slurm/bin), and --grafana there too when FMCLUSTER_GRAFANA is `self-hosted`
# A failed step does not stop the later ones (image and image-watch need enroot, and are skipped without it). Every
# step is idempotent, so running the script again is safe. HyperPod fails the whole cluster when this script exits
# non-zero, so only a node that cannot run training fails it: settings, group, install, scratch, nccl and enroot fail
# the node (and users: slurmd cannot start a job of a user the node lacks); slurm-hooks, accounting, image, image-watch
# and observability only warn (jobs still run: with the environment of the
# submitter, pulling the image from ECR, without metrics), each in one WARNING line naming the step and the log.
#
# Settings: fmcluster.env beside this script (the HyperPodSlurmCluster construct deploys it with the scripts), lines
# of FMCLUSTER_CLUSTER, FMCLUSTER_REGION, FMCLUSTER_NCCL_PREFIX, FMCLUSTER_IMAGE_PARAMETER,
# FMCLUSTER_CONTROLLER_GROUP, FMCLUSTER_FSX_MOUNT (empty: no shared file system), FMCLUSTER_PROMETHEUS (`managed` or
# `none`; missing: none), FMCLUSTER_GRAFANA, FMCLUSTER_ENDPOINT_PARAMETER (needed with `managed`) and FMCLUSTER_MIRROR
# (an S3 prefix for observability.sh's downloads; empty: the public release sites) and FMCLUSTER_USERS_PARAMETER (the
# SSM parameter of the cluster's users; empty: no users step). The node's instance group is
# the one whose instance has one of this node's IP addresses in HyperPod's resource configuration:
# $SAGEMAKER_RESOURCE_CONFIG_PATH, which HyperPod sets for lifecycle scripts, else /opt/ml/config/resource_config.json
# (as AWS's reference on_create.sh).
# lib.sh, observability.sh and nccl-tests.sbatch sit beside this script in the lifecycle bucket, and one directory up
# in the fmcluster package; dashboards/ sits beside it too, and two directories up in the package.
#
# Log: /var/log/fmcluster/lifecycle.log holds every step's output (each step also keeps its own log beside it);
# everything also goes to stderr, which HyperPod sends to CloudWatch. When a step fails, the last line names the
# failed steps and the log, and the exit status is 1, so HyperPod reports the lifecycle failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -f "$HERE/lib.sh" ]]; then
  NODE_DIR="$HERE" # as deployed: every script in one directory
else
  NODE_DIR="$(dirname "$HERE")" # in the fmcluster package: node/hyperpod/ below node/
fi
# shellcheck source=../lib.sh
source "$NODE_DIR/lib.sh"
# shellcheck source=ssm.sh
source "$HERE/ssm.sh"

LOG_FILE="$LOG_DIR/lifecycle.log"
INSTALL_DIR=/opt/fmcluster/node
DASHBOARDS_DIR=/opt/fmcluster/dashboards
NCCL_TESTS=/opt/fmcluster/nccl-tests.sbatch
SETTINGS_FILE="$HERE/fmcluster.env"
RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}"
SCRIPTS=(lib.sh ssm.sh nvme-raid.sh nccl-env.sh enroot-pyxis.sh slurm-hooks.sh import-image.sh observability.sh
  image-watch.sh training-image.sh slurm-hold.sh users.sh)
SLURM_HOOKS=(task-prolog.sh gpu-job-map.sh)
FMCLUSTER_CLUSTER=""
FMCLUSTER_REGION=""
FMCLUSTER_NCCL_PREFIX=""
FMCLUSTER_IMAGE_PARAMETER=""
FMCLUSTER_CONTROLLER_GROUP=""
FMCLUSTER_FSX_MOUNT=""
FMCLUSTER_PROMETHEUS=none
FMCLUSTER_GRAFANA=""
FMCLUSTER_ENDPOINT_PARAMETER=""
FMCLUSTER_MIRROR=""
FMCLUSTER_USERS_PARAMETER=""
FAILED=()
shopt -s globstar nullglob

# fail_lifecycle REASON STEP...: the one line that says which steps failed and where to read more; exit 1.
fail_lifecycle() {
  local reason="$1" steps
  shift
  steps="$(printf ', %s' "$@")"
  if (($# > 1)); then
    steps="steps ${steps:2}"
  else
    steps="step ${steps:2}"
  fi
  die "fmcluster lifecycle FAILED at $steps: $reason (log: ${LOG_FILE#"$ROOT"})"
}

# read_settings: the FMCLUSTER_* settings from fmcluster.env (only known keys; the file is not run as code).
read_settings() {
  local line key value
  if [[ ! -f "$SETTINGS_FILE" ]]; then
    fail_lifecycle "$SETTINGS_FILE is missing; deploy the scripts with fmcluster's HyperPodSlurmCluster" settings
  fi
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ -z "$line" || "$line" == \#* ]]; then
      continue
    fi
    key="${line%%=*}"
    value="${line#*=}"
    case "$key" in
      FMCLUSTER_CLUSTER | FMCLUSTER_REGION | FMCLUSTER_NCCL_PREFIX | FMCLUSTER_IMAGE_PARAMETER | \
        FMCLUSTER_CONTROLLER_GROUP | FMCLUSTER_FSX_MOUNT | FMCLUSTER_PROMETHEUS | FMCLUSTER_GRAFANA | \
        FMCLUSTER_ENDPOINT_PARAMETER | FMCLUSTER_MIRROR | FMCLUSTER_USERS_PARAMETER)
        printf -v "$key" '%s' "$value"
        ;;
      *) log WARN "$SETTINGS_FILE: ignoring unknown setting '$key'" ;;
    esac
  done <"$SETTINGS_FILE"
  for key in FMCLUSTER_CLUSTER FMCLUSTER_REGION FMCLUSTER_NCCL_PREFIX FMCLUSTER_IMAGE_PARAMETER \
    FMCLUSTER_CONTROLLER_GROUP; do
    if [[ -z "${!key}" ]]; then
      fail_lifecycle "$SETTINGS_FILE sets no $key" settings
    fi
  done
  case "$FMCLUSTER_PROMETHEUS" in
    none) ;;
    managed)
      if [[ -z "$FMCLUSTER_ENDPOINT_PARAMETER" ]]; then
        fail_lifecycle "$SETTINGS_FILE sets FMCLUSTER_PROMETHEUS=managed but no FMCLUSTER_ENDPOINT_PARAMETER" settings
      fi
      ;;
    *)
      fail_lifecycle "$SETTINGS_FILE sets FMCLUSTER_PROMETHEUS to '$FMCLUSTER_PROMETHEUS'; it must be managed or none" \
        settings
      ;;
  esac
}

# instance_group: the name of this node's instance group, from HyperPod's resource configuration.
instance_group() {
  local config="$ROOT$RESOURCE_CONFIG" addresses
  if [[ ! -f "$config" ]]; then
    printf '%s is missing (SAGEMAKER_RESOURCE_CONFIG_PATH or the default); is this a SageMaker HyperPod node?\n' \
      "$RESOURCE_CONFIG" >&2
    return 1
  fi
  addresses="$(hostname -I)"
  python3 -c '
import json, sys
path, mine = sys.argv[1], set(sys.argv[2].split())
try:
    groups = json.load(open(path))["InstanceGroups"]
except (OSError, ValueError, KeyError, TypeError) as error:
    sys.exit(f"cannot read the instance groups of {path}: {error!r}")
for group in groups:
    for instance in group.get("Instances", []):
        if instance.get("CustomerIpAddress") in mine:
            print(group["Name"])
            sys.exit(0)
shown = ", ".join(sorted(mine)) or "none"
sys.exit(f"none of the addresses of this node ({shown}) is an instance in {path}")
' "$config" "$addresses"
}

# script PATH: where to run a node script from: the installed copy, else the copy that came with this script.
script() {
  if [[ -f "$ROOT$INSTALL_DIR/$1" ]]; then
    printf '%s\n' "$ROOT$INSTALL_DIR/$1"
  elif [[ -f "$HERE/$1" ]]; then
    printf '%s\n' "$HERE/$1"
  else
    printf '%s\n' "$NODE_DIR/$1"
  fi
}

# dashboards: fmcluster's dashboards directory: the installed copy, else the one that came with this script.
dashboards() {
  if [[ -f "$ROOT$DASHBOARDS_DIR/agent.yml" ]]; then
    printf '%s\n' "$ROOT$DASHBOARDS_DIR"
  elif [[ -d "$HERE/dashboards" ]]; then
    printf '%s\n' "$HERE/dashboards"
  else
    printf '%s\n' "$(dirname "$NODE_DIR")/dashboards"
  fi
}

# install_scripts: copy the node scripts to INSTALL_DIR, the dashboards to DASHBOARDS_DIR and the nccl-tests job to
# NCCL_TESTS (replacing older copies; unchanged files are left alone).
install_scripts() {
  local name mode source file
  for name in "${SCRIPTS[@]}"; do
    source="$HERE/$name"
    if [[ ! -f "$source" ]]; then
      source="$NODE_DIR/$name"
    fi
    mode=0755
    if [[ "$name" == lib.sh || "$name" == ssm.sh ]]; then
      mode=0644 # sourced, never run
    fi
    write_file "$ROOT$INSTALL_DIR/$name" "$mode" <"$source"
  done
  for name in "${SLURM_HOOKS[@]}"; do
    source="$HERE/$name"
    if [[ ! -f "$source" ]]; then
      source="$NODE_DIR/slurm/$name"
    fi
    write_file "$ROOT$INSTALL_DIR/slurm/$name" 0755 <"$source"
  done
  log INFO "node scripts installed in $INSTALL_DIR"
  source="$HERE/dashboards"
  if [[ ! -d "$source" ]]; then
    source="$(dirname "$NODE_DIR")/dashboards"
  fi
  for file in "$source"/**; do
    if [[ -f "$file" ]]; then
      write_file "$ROOT$DASHBOARDS_DIR/${file#"$source/"}" 0644 <"$file"
    fi
  done
  log INFO "dashboards installed in $DASHBOARDS_DIR"
  source="$HERE/nccl-tests.sbatch"
  if [[ ! -f "$source" ]]; then
    source="$NODE_DIR/nccl-tests.sbatch"
  fi
  write_file "$ROOT$NCCL_TESTS" 0755 <"$source"
  log INFO "nccl-tests job installed as $NCCL_TESTS"
}

# nccl_step GROUP: nccl-env.sh with the group's NCCL parameter, or without one (the defaults) when there is none.
nccl_step() {
  local parameter="$FMCLUSTER_NCCL_PREFIX/$1/nccl-env" value
  local -a arguments=("$parameter")
  if ! command -v aws >/dev/null 2>&1; then
    : # nccl-env.sh says so and writes the defaults
  elif ! value="$(retry ssm_get "$FMCLUSTER_REGION" "$parameter")"; then
    log WARN "SSM parameter $parameter could not be checked; nccl-env.sh reads it itself"
  elif [[ -z "$value" ]]; then
    log INFO "there is no SSM parameter $parameter: the NCCL defaults apply to group $1"
    arguments=()
  fi
  bash "$(script nccl-env.sh)" ${arguments[@]+"${arguments[@]}"}
}

# observability_step GROUP: observability.sh for this cluster's workspace; on the controller with the Slurm exporter
# (and Grafana when self-hosted).
observability_step() {
  local -a arguments=(--cluster "$FMCLUSTER_CLUSTER" --region "$FMCLUSTER_REGION"
    --endpoint-parameter "$FMCLUSTER_ENDPOINT_PARAMETER" --config-dir "$(dashboards)")
  if [[ "$1" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    arguments+=(--head-node)
    if [[ "$FMCLUSTER_GRAFANA" == self-hosted ]]; then
      arguments+=(--grafana)
    fi
  fi
  if [[ -n "$FMCLUSTER_MIRROR" ]]; then
    arguments+=(--mirror "$FMCLUSTER_MIRROR")
  fi
  # HyperPod keeps Slurm's commands in /opt/slurm/bin, which is not on the lifecycle scripts' PATH
  PATH="$ROOT$(slurm_prefix)/bin:$PATH" bash "$(script observability.sh)" "${arguments[@]}"
}

# in_step COMMAND...: COMMAND with log() writing to stderr only, which run_step adds to lifecycle.log (once).
in_step() {
  local LOG_FILE=/dev/null
  "$@"
}

# run_step NAME COMMAND...: run COMMAND with its output added to lifecycle.log (and stderr); remember a failure.
run_step() {
  local name="$1" status on_error
  shift
  log INFO "step $name: starting"
  # Not `pipeline || status=$?`: inside an || list bash ignores set -e, also in the step's functions. The step's
  # own failure is reported below, so lib.sh's ERR trap is off for the pipeline itself (and on inside the step).
  on_error="$(trap -p ERR)"
  trap - ERR
  set +e
  (
    eval "$on_error"
    set -e
    in_step "$@"
  ) 2>&1 | tee -a "$LOG_FILE" >&2
  status="${PIPESTATUS[0]}"
  set -e
  eval "$on_error"
  if ((status == 0)); then
    log INFO "step $name: done"
  else
    log ERROR "step $name: failed with exit status $status"
    FAILED+=("$name")
  fi
}

# warn_only STEP CONSEQUENCE...: when STEP just failed, it only warns, in one line naming it, what follows and the log
# (HyperPod would fail the whole cluster for it).
warn_only() {
  local step="$1"
  shift
  if ((${#FAILED[@]})) && [[ "${FAILED[-1]}" == "$step" ]]; then
    unset 'FAILED[-1]'
    log WARN "fmcluster lifecycle WARNING: step $step failed; $* (log: ${LOG_FILE#"$ROOT"})"
  fi
}

main() {
  local group
  if (($#)); then
    printf 'usage: %s\n' "$0" >&2
    exit 2
  fi
  require_root
  log INFO "fmcluster lifecycle starts on $(hostname)"
  read_settings
  export AWS_REGION="$FMCLUSTER_REGION" AWS_DEFAULT_REGION="$FMCLUSTER_REGION"
  if ! group="$(instance_group 2>&1)"; then
    fail_lifecycle "$group" group
  fi
  log INFO "cluster $FMCLUSTER_CLUSTER, instance group $group"
  if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    # slurmd runs already (OnInitComplete): no job lands here before the steps below are done (slurm-hold.sh)
    run_step hold bash "$(script slurm-hold.sh)" hold
    warn_only hold "Slurm may give this node a job before its set-up is done"
  fi

  run_step install install_scripts
  run_step scratch bash "$(script nvme-raid.sh)"
  run_step nccl nccl_step "$group"
  run_step enroot bash "$(script enroot-pyxis.sh)"
  run_step slurm-hooks bash "$(script slurm-hooks.sh)"
  warn_only slurm-hooks "jobs get the submitter's environment, not this group's NCCL settings, and GPU metrics no" \
    "job label"
  if [[ -n "$FMCLUSTER_USERS_PARAMETER" ]]; then
    run_step users bash "$(script users.sh)" sync "$FMCLUSTER_USERS_PARAMETER"
  fi
  if [[ -n "$FMCLUSTER_USERS_PARAMETER" && "$group" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    run_step accounting bash "$(script users.sh)" sync "$FMCLUSTER_USERS_PARAMETER" --accounting "$FMCLUSTER_CLUSTER"
    warn_only accounting "the users run jobs, but outside any Slurm association until users.sh --accounting succeeds"
  fi
  if [[ "$group" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    if [[ " ${FAILED[*]} " == *" enroot "* ]]; then
      log WARN "steps image and image-watch: skipped, since they need enroot"
    elif [[ -z "$FMCLUSTER_FSX_MOUNT" ]]; then
      log INFO "step image: skipped, since the cluster has no shared file system to keep the image on"
    else
      run_step image bash "$(script import-image.sh)" "$FMCLUSTER_IMAGE_PARAMETER" "$FMCLUSTER_FSX_MOUNT"
      warn_only image "jobs pull the training image from ECR instead of $FMCLUSTER_FSX_MOUNT/enroot/images"
      # the image built after boot, or rebuilt later, reaches the nodes through this timer (image-watch.sh's header)
      run_step image-watch bash "$(script image-watch.sh)" install "$FMCLUSTER_REGION" "$FMCLUSTER_IMAGE_PARAMETER" \
        "$FMCLUSTER_FSX_MOUNT"
      warn_only image-watch "a training image published after now does not reach $FMCLUSTER_FSX_MOUNT/enroot/images;" \
        "jobs pull it from ECR"
    fi
  fi
  if [[ "$FMCLUSTER_PROMETHEUS" == managed ]]; then
    run_step observability observability_step "$group"
    warn_only observability "this node runs without metrics until observability.sh succeeds (e.g. once the" \
      "mirror is filled)"
  else
    log INFO "step observability: skipped, since observability.prometheus is none"
  fi

  if ((${#FAILED[@]})); then
    if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
      bash "$(script slurm-hold.sh)" fail "${FAILED[@]}" || true
    fi
    fail_lifecycle "see the lines of each step above" "${FAILED[@]}"
  fi
  if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    run_step release bash "$(script slurm-hold.sh)" release
    if ((${#FAILED[@]})); then
      fail_lifecycle "the node is set up but could not be given back to Slurm" "${FAILED[@]}"
    fi
  fi
  log INFO "fmcluster lifecycle finished"
}

main "$@"
