#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# on_create.sh: SageMaker HyperPod's OnCreate lifecycle script for an fmcluster cluster. HyperPod runs it as root on
# every node as the node joins the cluster (creation, replacement of a faulty node, scale-up).
#
# Usage: on_create.sh
#
# Steps, in this order, each run by run-step.sh (the runner AWS PCS nodes use too, with the same fail/warn policy;
# rendered from fmcluster.node_files.STEPS), each a process of its own:
#   install  run-step.sh install: every node file beside this script (the tree and `manifest` of
#            fmcluster.node_files, the same a PCS node gets) into /opt/fmcluster, each with its mode; every later step
#            runs from there
#   hold     slurm-hold.sh hold, on every node but the controller: the node is drained in Slurm until the lifecycle
#            ends (HyperPod runs this script as OnInitComplete, after its own Slurm set-up: slurmd may have registered
#            and could be given jobs); at the end `release` resumes it, or `fail` keeps it drained naming the failed
#            steps. Draining changes slurmctld's node state only, never slurm.conf (HyperPod's; slurm-hooks.sh)
#   updates  package-updates.sh: needrestart never restarts slurmd, unattended-upgrades off (the apt installs of the
#            enroot step below then cannot restart slurmd either)
#   scratch  nvme-raid.sh: /scratch on the instance-store NVMe disks (nothing to do on types without them)
#   shared-dirs  only with FMCLUSTER_FSX_MOUNT: shared-dirs.sh <it>: the directories every user writes in there
#            (checkpoints, datasets, jobs: 1777), made by whichever node gets there first
#   nccl     nccl-env.sh <FMCLUSTER_NCCL_PREFIX>/<instance group>/nccl-env: the NCCL/libfabric environment of jobs
#            (nccl-env.sh's defaults alone when the group has no such parameter)
#   enroot   enroot-pyxis.sh: enroot and pyxis (installed when the image lacks them), caches on local disk
#   slurm-hooks  slurm-hooks.sh: the NCCL environment in every job and the GPU-to-job files for dcgm-exporter,
#            through HyperPod's prolog.d/epilog.d
#   users    only with FMCLUSTER_USERS_PARAMETER: users.sh install <it>: the cluster file's users, now and from a
#            timer every 10 minutes (same uid and gid on every node, homes on the file system, keys, sudo for admins;
#            users.sh's header)
#   accounting  on the controller (where HyperPod runs slurmdbd), with FMCLUSTER_USERS_PARAMETER: slurm-accounting.sh
#            install <it> <cluster> --now: each user's Slurm association in the account named after the cluster, now
#            and from a timer every 10 minutes
#   image    import-image.sh, on the controller only: the training image, once, as a squashfs on the file system
#   image-watch  image-watch.sh install, on the controller only: a timer that imports the image when it is published
#            (usually after boot: the cluster does not wait for the image build) or changed, for jobs to find
#   observability  only when FMCLUSTER_PROMETHEUS is `managed`: observability.sh --cluster --region
#            --endpoint-parameter FMCLUSTER_ENDPOINT_PARAMETER, with --head-node on the controller (the Slurm
#            exporter), and --grafana there too when FMCLUSTER_GRAFANA is `self-hosted`; it installs from
#            FMCLUSTER_ARTIFACT_MIRROR, as every other step does
#   fabric   only for a group FMCLUSTER_FABRIC names (`GROUP=EFA,GPUS,FLOOR` words; fmcluster.fabric): fabric-check.sh
#            --efa EFA --gpus GPUS [--nvlink-floor FLOOR]: EFA devices, GPUs and a one-node all_reduce; a node that
#            fails stays drained with the reason "fmcluster fabric: ...", which `release` leaves as it is
#   plan-drain  on the controller, only with FMCLUSTER_TRAINING_PLANS (`ARN=MINUTES=PARTITION[,...]` words;
#            fmcluster.drains.plan_words): plan-end-drain.sh install REGION <words>: a timer that drains a training
#            plan's partitions and signals their jobs to checkpoint before the plan ends
#   release  slurm-hold.sh release (not on the controller)
# A failed step does not stop the later ones (image and image-watch need enroot: the runner skips them without it).
# Every step is idempotent, so running the script again is safe. HyperPod fails the whole cluster when this script
# exits non-zero, so only a node that cannot run training fails it: the required steps (settings, group, install,
# scratch, nccl, users, release) fail the node (users: slurmd cannot start a job of a user the node
# lacks); hold, shared-dirs, enroot (until the mirror pins enroot and pyxis: issue 22), slurm-hooks, accounting, image,
# image-watch and observability only warn
# (jobs still run: with the environment of the submitter, pulling the image from ECR, without metrics), each in one
# WARNING line naming the step and the log.
#
# Settings: fmcluster.env beside this script (the HyperPodSlurmCluster construct deploys it with the scripts), lines
# of FMCLUSTER_CLUSTER, FMCLUSTER_REGION, FMCLUSTER_NCCL_PREFIX, FMCLUSTER_IMAGE_PARAMETER,
# FMCLUSTER_CONTROLLER_GROUP, FMCLUSTER_FSX_MOUNT (empty: no shared file system), FMCLUSTER_PROMETHEUS (`managed` or
# `none`; missing: none), FMCLUSTER_GRAFANA, FMCLUSTER_ENDPOINT_PARAMETER (needed with `managed`),
# FMCLUSTER_ARTIFACT_MIRROR (the artifact mirror every step installs from) and FMCLUSTER_USERS_PARAMETER (the
# SSM parameter of the cluster's users; empty: no users step), FMCLUSTER_FABRIC (empty: no fabric step) and
# FMCLUSTER_TRAINING_PLANS (empty: no plan-drain step). The node's instance group is
# the one whose instance has one of this node's IP addresses in HyperPod's resource configuration:
# $SAGEMAKER_RESOURCE_CONFIG_PATH, which HyperPod sets for lifecycle scripts, else /opt/ml/config/resource_config.json
# (as AWS's reference on_create.sh).
# The node files sit beside this script as they will in /opt/fmcluster (node/lib.sh, node/run-step.sh, dashboards/,
# nccl-tests.sbatch, manifest): the lifecycle archive of fmcluster.constructs.hyperpod.lifecycle_files.
#
# Log: /var/log/fmcluster/lifecycle.log holds every step's output (each step also keeps its own log beside it);
# everything also goes to stderr, which HyperPod sends to CloudWatch. When a step fails, the last line names the
# failed steps and the log, and the exit status is 1, so HyperPod reports the lifecycle failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$HERE/node/lib.sh"
# shellcheck source=ssm.sh
source "$HERE/node/hyperpod/ssm.sh"

LOG_FILE="$LOG_DIR/lifecycle.log"
RUNNER="$ROOT/opt/fmcluster/node/run-step.sh"
SETTINGS_FILE="$HERE/fmcluster.env"
RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}"
FMCLUSTER_CLUSTER=""
FMCLUSTER_REGION=""
FMCLUSTER_NCCL_PREFIX=""
FMCLUSTER_IMAGE_PARAMETER=""
FMCLUSTER_CONTROLLER_GROUP=""
FMCLUSTER_FSX_MOUNT=""
FMCLUSTER_PROMETHEUS=none
FMCLUSTER_GRAFANA=""
FMCLUSTER_ENDPOINT_PARAMETER=""
FMCLUSTER_ARTIFACT_MIRROR=""
FMCLUSTER_USERS_PARAMETER=""
FMCLUSTER_FABRIC=""
FMCLUSTER_TRAINING_PLANS=""
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
        FMCLUSTER_ENDPOINT_PARAMETER | FMCLUSTER_ARTIFACT_MIRROR | \
        FMCLUSTER_USERS_PARAMETER | FMCLUSTER_FABRIC | FMCLUSTER_TRAINING_PLANS)
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

# nccl_arguments GROUP: nccl-env.sh's argument: the group's NCCL parameter, or none (the defaults) when it has none.
nccl_arguments() {
  local parameter="$FMCLUSTER_NCCL_PREFIX/$1/nccl-env" value
  if ! command -v aws >/dev/null 2>&1; then
    printf '%s\n' "$parameter" # nccl-env.sh says so and writes the defaults
  elif ! value="$(retry ssm_get "$FMCLUSTER_REGION" "$parameter")"; then
    log WARN "SSM parameter $parameter could not be checked; nccl-env.sh reads it itself"
    printf '%s\n' "$parameter"
  elif [[ -z "$value" ]]; then
    log INFO "there is no SSM parameter $parameter: the NCCL defaults apply to group $1"
  else
    printf '%s\n' "$parameter"
  fi
}

# observability_arguments GROUP: observability.sh's, for this cluster's workspace; on the controller with the Slurm
# exporter (and Grafana when self-hosted).
observability_arguments() {
  local -a arguments=(--cluster "$FMCLUSTER_CLUSTER" --region "$FMCLUSTER_REGION"
    --endpoint-parameter "$FMCLUSTER_ENDPOINT_PARAMETER")
  if [[ "$1" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    arguments+=(--head-node)
    if [[ "$FMCLUSTER_GRAFANA" == self-hosted ]]; then
      arguments+=(--grafana)
    fi
  fi
  printf '%s\n' "${arguments[@]}"
}

# fabric_arguments GROUP: fabric-check.sh's arguments for GROUP, from its FMCLUSTER_FABRIC word; nothing when none.
fabric_arguments() {
  local word efa gpus floor
  for word in $FMCLUSTER_FABRIC; do
    if [[ "$word" =~ ^([a-z][a-z0-9-]*)=([0-9]+),([0-9]+),([0-9]+)$ && "${BASH_REMATCH[1]}" == "$1" ]]; then
      efa="${BASH_REMATCH[2]}" gpus="${BASH_REMATCH[3]}" floor="${BASH_REMATCH[4]}"
      printf '%s\n' --efa "$efa" --gpus "$gpus"
      if ((floor > 0)); then
        printf '%s\n' --nvlink-floor "$floor"
      fi
    fi
  done
}

# run_step STEP [ARGUMENTS...]: run-step.sh STEP (its policy: a warn-only step exits 0 after its WARNING line), its
# output added to lifecycle.log (and stderr); a required step's failure is remembered.
run_step() {
  local name="$1" status runner="$RUNNER" on_error
  if [[ "$name" == install ]]; then
    runner="$HERE/node/run-step.sh" # /opt/fmcluster holds nothing yet
  elif [[ ! -f "$runner" ]]; then
    log ERROR "step $name: /opt/fmcluster holds no node files; run the install step first"
    FAILED+=("$name")
    return 0
  fi
  # Not `pipeline || status=$?`, which would hide a failure of tee; the step's failure is reported by the runner,
  # so lib.sh's ERR trap is off for the pipeline.
  on_error="$(trap -p ERR)"
  trap - ERR
  set +e
  bash "$runner" "$@" 2>&1 | tee -a "$LOG_FILE" >&2
  status="${PIPESTATUS[0]}"
  set -e
  eval "$on_error"
  if ((status != 0)); then
    FAILED+=("$name")
  fi
}

main() {
  local group home_base
  local -a arguments
  if (($#)); then
    printf 'usage: %s\n' "$0" >&2
    exit 2
  fi
  require_root
  log INFO "fmcluster lifecycle starts on $(hostname)"
  read_settings
  export AWS_REGION="$FMCLUSTER_REGION" AWS_DEFAULT_REGION="$FMCLUSTER_REGION" FMCLUSTER_ARTIFACT_MIRROR # mirror_get
  if ! group="$(instance_group 2>&1)"; then
    fail_lifecycle "$group" group
  fi
  log INFO "cluster $FMCLUSTER_CLUSTER, instance group $group"
  run_step install "$HERE"
  if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    # slurmd runs already (OnInitComplete): no job lands here before the steps below are done (slurm-hold.sh)
    run_step hold hold
  fi
  run_step updates
  run_step scratch
  if [[ -n "$FMCLUSTER_FSX_MOUNT" ]]; then
    run_step shared-dirs "$FMCLUSTER_FSX_MOUNT"
  else
    log INFO "step shared-dirs: skipped, since the cluster has no shared file system"
  fi
  mapfile -t arguments < <(nccl_arguments "$group")
  run_step nccl ${arguments[@]+"${arguments[@]}"}
  run_step enroot
  run_step slurm-hooks
  if [[ -n "$FMCLUSTER_USERS_PARAMETER" ]]; then
    # The home base the file gives (no shared file system: /home), never guessed from what is mounted right now.
    home_base=/home
    [[ -z "$FMCLUSTER_FSX_MOUNT" ]] || home_base="$FMCLUSTER_FSX_MOUNT/home"
    run_step users install "$FMCLUSTER_USERS_PARAMETER" --home-base "$home_base"
  fi
  if [[ -n "$FMCLUSTER_USERS_PARAMETER" && "$group" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    run_step accounting install "$FMCLUSTER_USERS_PARAMETER" "$FMCLUSTER_CLUSTER" --now
  fi
  if [[ "$group" == "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    if [[ -z "$FMCLUSTER_FSX_MOUNT" ]]; then
      log INFO "step image: skipped, since the cluster has no shared file system to keep the image on"
    else
      run_step image "$FMCLUSTER_IMAGE_PARAMETER" "$FMCLUSTER_FSX_MOUNT"
      # the image built after boot, or rebuilt later, reaches the nodes through this timer (image-watch.sh's header)
      run_step image-watch install "$FMCLUSTER_REGION" "$FMCLUSTER_IMAGE_PARAMETER" "$FMCLUSTER_FSX_MOUNT"
    fi
  fi
  if [[ "$FMCLUSTER_PROMETHEUS" == managed ]]; then
    mapfile -t arguments < <(observability_arguments "$group")
    run_step observability "${arguments[@]}"
  else
    log INFO "step observability: skipped, since observability.prometheus is none"
  fi
  if [[ "$group" == "$FMCLUSTER_CONTROLLER_GROUP" && -n "$FMCLUSTER_TRAINING_PLANS" ]]; then
    read -r -a arguments <<<"$FMCLUSTER_TRAINING_PLANS"
    run_step plan-drain install "$FMCLUSTER_REGION" "${arguments[@]}"
  fi
  mapfile -t arguments < <(fabric_arguments "$group")
  if ((${#arguments[@]})); then
    run_step fabric "${arguments[@]}"
  fi

  if ((${#FAILED[@]})); then
    if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" && -f "$RUNNER" ]]; then
      bash "$ROOT/opt/fmcluster/node/hyperpod/slurm-hold.sh" fail "${FAILED[@]}" || true
    fi
    fail_lifecycle "see the lines of each step above" "${FAILED[@]}"
  fi
  if [[ "$group" != "$FMCLUSTER_CONTROLLER_GROUP" ]]; then
    run_step release release
    if ((${#FAILED[@]})); then
      fail_lifecycle "the node is set up but could not be given back to Slurm" "${FAILED[@]}"
    fi
  fi
  log INFO "fmcluster lifecycle finished"
}

main "$@"
