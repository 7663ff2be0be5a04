#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# run-step.sh: the one runner of a node's set-up steps, on AWS PCS (every step is a node lifecycle action running
# this script) and on SageMaker HyperPod (on_create.sh runs every step through it).
#
# Usage: run-step.sh install SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI]
#        run-step.sh STEP [ARGUMENTS...]
#        run-step.sh bake SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI]
#
# install  every node file into /opt/fmcluster, as the `manifest` at the top of SOURCE lists them (`MODE PATH`
#          lines: S3 keeps no mode). SOURCE is the node bundle's S3 URI (a zip: fetched with `aws s3 cp`, retried with
#          backoff, unpacked with unzip, or `python3 -m zipfile` where unzip is missing) or a directory holding the
#          same tree (HyperPod's lifecycle scripts as HyperPod downloaded them). Each file replaces the old one by a
#          rename, so a script that is running keeps reading its own copy. --region and --slurm-version are kept in
#          /opt/fmcluster/node.env for every later step (AWS_DEFAULT_REGION; FMCLUSTER_SLURM_VERSION, which makes
#          lib.sh's slurm_prefixes use the cluster's Slurm of the image), and --mirror, the project's artifact mirror
#          (FMCLUSTER_ARTIFACT_MIRROR, which mirror.sh's mirror_get installs from). Required.
# STEP     one of the steps below (rendered from fmcluster.node_files.STEPS): its script from /opt/fmcluster/node with
#          ARGUMENTS, with the image's Slurm bin/ first on PATH (not on the PATH of lifecycle scripts; the Slurm
#          exporter and slurm-hold.sh need it).
# bake     an image build (EC2 Image Builder's component, fmcluster.constructs.node_image): install, then every step
#          the table marks for the image (STEP_BAKE "also" or "image", in STEP_ORDER), each without arguments and each
#          required (an image without one of them is no baked image: the build fails, naming the step); then
#          FMCLUSTER_NODE_IMAGE=baked in node.env, which a later install keeps. On a node of that image a step marked
#          "image" is skipped (recorded done): what it does is on the image's disk already.
# One policy for both orchestrators: a required step that fails (or is skipped) exits 1 with one ERROR line naming
# the step, its exit status and its log; on PCS its lifecycle action's onError TERMINATE then ends the node, on
# HyperPod on_create.sh fails the lifecycle and keeps the node drained. A warn-only step that fails writes one
# WARNING line naming the step, what follows and its log, and exits 0. A step whose `needs` did not succeed on this
# boot is skipped. Every step is idempotent.
# State: /run/fmcluster/steps/STEP holds done, failed, warned or skipped (for `needs`, and on_create.sh's summary).
# Log: /var/log/fmcluster/run-step.log; each script also keeps its own, /var/log/fmcluster/<script>.log. A step's
# FAILED or WARNING line also goes to the instance's console (/dev/console), whose output EC2 keeps (GetConsoleOutput),
# so `fmcluster diagnose` sees it without logging in: the PCS agent keeps a lifecycle action's output in
# /var/log/amazon/pcs/lifecycle/actions/ on the node only (aws-hpc-recipes recipes/pcs-scripts). That the kernel's
# console is the serial port EC2 records on the PCS-Ready DLAMI (console=ttyS0, as on Ubuntu's EC2 images) is
# (unconfirmed).
set -euo pipefail

ROOT="${FMCLUSTER_ROOT:-}"
NODE_ROOT="$ROOT/opt/fmcluster"
SETTINGS="$NODE_ROOT/node.env"
STATE_DIR="$ROOT/run/fmcluster/steps"

# --- steps rendered from fmcluster's one list (node_files.STEPS); do not edit here ---
declare -A STEP_SCRIPT=([hold]='hyperpod/slurm-hold.sh' [updates]='package-updates.sh' [scratch]='nvme-raid.sh' [lustre]='mount-lustre.sh' [shared-dirs]='shared-dirs.sh' [nccl]='nccl-env.sh' [enroot]='enroot-pyxis.sh' [slurm-hooks]='slurm-hooks.sh' [users]='users.sh' [accounting]='slurm-accounting.sh' [image]='hyperpod/import-image.sh' [image-watch]='image-watch.sh' [observability]='observability.sh' [plan-drain]='plan-end-drain.sh' [fabric]='fabric-check.sh' [release]='hyperpod/slurm-hold.sh')
declare -A STEP_REQUIRED=([hold]='0' [updates]='0' [scratch]='1' [lustre]='1' [shared-dirs]='0' [nccl]='1' [enroot]='0' [slurm-hooks]='0' [users]='1' [accounting]='0' [image]='0' [image-watch]='0' [observability]='0' [plan-drain]='0' [fabric]='0' [release]='1')
declare -A STEP_NEEDS=([hold]='' [updates]='' [scratch]='' [lustre]='' [shared-dirs]='' [nccl]='' [enroot]='' [slurm-hooks]='' [users]='' [accounting]='users' [image]='enroot' [image-watch]='enroot' [observability]='' [plan-drain]='' [fabric]='' [release]='')
declare -A STEP_CONSEQUENCE=([hold]='Slurm may give this node a job before its set-up is done' [updates]='upgrades may restart slurmd or change the driver' [scratch]='' [lustre]='' [shared-dirs]='users cannot write in /fsx/checkpoints, /fsx/datasets, /fsx/jobs until an administrator makes them' [nccl]='' [enroot]='jobs cannot use --container-image (no enroot/pyxis on this node)' [slurm-hooks]="jobs get the submitter's environment, not the group's NCCL settings" [users]='' [accounting]='the users have no Slurm association: their jobs run outside it, or are refused where Slurm enforces it' [image]='jobs pull the training image from ECR' [image-watch]='a training image published later is not imported' [observability]='the node runs without metrics' [plan-drain]='jobs are not asked to checkpoint before a training plan ends' [fabric]='the node is drained in Slurm if Slurm knows it (sinfo -R says why)' [release]='')
declare -A STEP_BAKE=([hold]='boot' [updates]='image' [scratch]='boot' [lustre]='boot' [shared-dirs]='boot' [nccl]='boot' [enroot]='also' [slurm-hooks]='boot' [users]='boot' [accounting]='boot' [image]='boot' [image-watch]='boot' [observability]='boot' [plan-drain]='boot' [fabric]='boot' [release]='boot')
STEP_ORDER=(hold updates scratch lustre shared-dirs nccl enroot slurm-hooks users accounting image image-watch observability plan-drain fabric release)
# --- end of rendered steps ---

usage() {
  printf 'usage: %s install|bake SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI] | STEP [ARGUMENTS...]\n' "$0" >&2
  printf 'steps: %s\n' "${!STEP_SCRIPT[*]}" >&2
  exit 2
}

# say MESSAGE: a line on stderr, before lib.sh (which comes with the files) is installed.
say() {
  printf '%s run-step[%s]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$*" >&2
}

# fetch URI REGION FILE: the bundle from S3, FMCLUSTER_RETRY_ATTEMPTS times at most (default 5), the wait doubling
# from FMCLUSTER_RETRY_DELAY seconds (default 2), as lib.sh's retry does.
fetch() {
  local attempts="${FMCLUSTER_RETRY_ATTEMPTS:-5}" delay="${FMCLUSTER_RETRY_DELAY:-2}" attempt
  local -a where=()
  [[ -z "$2" ]] || where=(--region "$2")
  for ((attempt = 1; ; attempt++)); do
    aws s3 cp --only-show-errors ${where[@]+"${where[@]}"} "$1" "$3" && return 0
    if ((attempt >= attempts)); then
      say "ERROR: $1 could not be fetched in $attempts attempts"
      return 1
    fi
    say "WARN: fetching $1 failed (attempt $attempt of $attempts); again in ${delay}s"
    sleep "$delay"
    delay=$((delay * 2))
  done
}

# unpack SOURCE REGION DIR: SOURCE's tree into DIR/files, checked against its manifest.
unpack() {
  local source="$1" region="$2" tmp="$3" mode path
  if [[ "$source" == s3://* ]]; then
    fetch "$source" "$region" "$tmp/bundle.zip" || return 1
    if command -v unzip >/dev/null 2>&1; then
      unzip -q "$tmp/bundle.zip" -d "$tmp/files" || return 1
    else
      python3 -m zipfile -e "$tmp/bundle.zip" "$tmp/files" || return 1
    fi
  elif [[ -d "$source" ]]; then
    cp -R "$source" "$tmp/files" || return 1
  else
    say "ERROR: $source is neither an S3 URI nor a directory"
    return 1
  fi
  if [[ ! -f "$tmp/files/manifest" || ! -f "$tmp/files/node/lib.sh" ]]; then
    say "ERROR: $source holds no fmcluster node files (no manifest and node/lib.sh at its top)"
    return 1
  fi
  while read -r mode path; do
    if [[ ! "$mode" =~ ^0[0-7]{3}$ || "$path" == *..* || ! -f "$tmp/files/$path" ]]; then
      say "ERROR: $source: the manifest names '$path' (mode '$mode'), which is not in it as a file"
      return 1
    fi
  done <"$tmp/files/manifest"
}

# place DIR: every file the manifest in DIR lists, with its mode, moved into /opt/fmcluster.
place() {
  local files="$1/files" mode path
  while read -r mode path; do
    mkdir -p "$(dirname "$NODE_ROOT/$path")" && chmod "$mode" "$files/$path" && mv -f "$files/$path" "$NODE_ROOT/$path" ||
      return 1
  done <"$files/manifest"
  mv -f "$files/manifest" "$NODE_ROOT/manifest"
}

# install_files SOURCE REGION SLURM_VERSION MIRROR: unpack and place, in a fresh directory beside /opt/fmcluster (the renames
# stay on one file system), removed afterwards whatever happened; then the settings of later steps.
install_files() {
  local source="$1" tmp image status=0
  mkdir -p "$NODE_ROOT" && tmp="$(mktemp -d "$NODE_ROOT/.install.XXXXXX")" || return 1
  if unpack "$source" "$2" "$tmp"; then
    # shellcheck source=lib.sh
    source "$tmp/files/node/lib.sh"
    place "$tmp" || status=$?
  else
    status=1
  fi
  rm -rf "$tmp"
  ((status == 0)) || return "$status"
  image="$(node_setting FMCLUSTER_NODE_IMAGE)" # lib.sh; the image's, kept: a node of a baked image stays one
  {
    [[ -z "$2" ]] || printf 'AWS_DEFAULT_REGION=%s\n' "$2"
    [[ -z "$3" ]] || printf 'FMCLUSTER_SLURM_VERSION=%s\n' "$3"
    [[ -z "${4:-}" ]] || printf 'FMCLUSTER_ARTIFACT_MIRROR=%s\n' "$4"
    [[ -z "$image" ]] || printf 'FMCLUSTER_NODE_IMAGE=%s\n' "$image"
  } >"$SETTINGS.new" && mv -f "$SETTINGS.new" "$SETTINGS"
  log INFO "node files from $source installed in ${NODE_ROOT#"$ROOT"} ($(wc -l <"$NODE_ROOT/manifest") files)"
}

# read_settings: node.env's known keys, exported (the file is not run as code).
read_settings() {
  local key value
  [[ -f "$SETTINGS" ]] || return 0
  while IFS='=' read -r key value; do
    case "$key" in
      AWS_DEFAULT_REGION | FMCLUSTER_SLURM_VERSION | FMCLUSTER_ARTIFACT_MIRROR | FMCLUSTER_NODE_IMAGE)
        export "$key=$value"
        ;;
    esac
  done <"$SETTINGS"
}

# record STEP OUTCOME
record() {
  mkdir -p "$STATE_DIR" && printf '%s\n' "$2" >"$STATE_DIR/$1"
}

# outcome STEP: what STEP came to on this boot (empty when it has not run).
outcome() {
  [[ -f "$STATE_DIR/$1" ]] && cat "$STATE_DIR/$1" || true
}

# to_console LINE: LINE on the instance's console (see the header); nothing where there is no console device.
to_console() {
  if [[ -c "$ROOT/dev/console" && -w "$ROOT/dev/console" ]]; then
    printf '%s run-step[%s]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$*" >"$ROOT/dev/console" 2>/dev/null || true
  fi
}

# finish STEP STATUS LOG: the policy: a required step fails the node, a warn-only one warns.
finish() {
  local step="$1" status="$2" step_log="$3" line
  if ((status == 0)); then
    record "$step" "done"
    log INFO "step $step: done"
    return 0
  fi
  if [[ "${STEP_REQUIRED[$step]}" == 1 || -n "${BAKING:-}" ]]; then
    record "$step" failed
    line="fmcluster step $step FAILED with exit status $status; the node cannot train without it (log: $step_log)"
    to_console "$line"
    die "$line"
  fi
  record "$step" warned
  line="fmcluster WARNING: step $step failed; ${STEP_CONSEQUENCE[$step]} (log: $step_log)"
  to_console "$line"
  log WARN "$line"
}

run_step() {
  local step="$1" script needed prefix status=0
  shift
  script="${STEP_SCRIPT[$step]}"
  read_settings
  # shellcheck source=lib.sh
  source "$NODE_ROOT/node/lib.sh"
  require_root
  if [[ "${STEP_BAKE[$step]}" == image && "${FMCLUSTER_NODE_IMAGE:-}" == baked && -z "${BAKING:-}" ]]; then
    record "$step" "done"
    log INFO "step $step: skipped, since this node's image was baked with it (FMCLUSTER_NODE_IMAGE=baked)"
    return 0
  fi
  for needed in ${STEP_NEEDS[$step]}; do
    if [[ "$(outcome "$needed")" != "done" ]]; then
      log WARN "step $step: skipped, since it needs step $needed, which did not succeed"
      finish "$step" 1 "${LOG_FILE#"$ROOT"}"
      return 0
    fi
  done
  log INFO "step $step: running ${script}${*:+ $*}"
  if prefix="$(slurm_prefix 2>/dev/null)"; then
    PATH="$ROOT$prefix/bin:$PATH"
  fi
  PATH="$PATH" bash "$NODE_ROOT/node/$script" "$@" || status=$?
  finish "$step" "$status" "/var/log/fmcluster/$(basename "$script" .sh).log"
}

# install SOURCE [--region REGION] [--slurm-version VERSION] [--mirror S3_URI]: the install step.
install() {
  local source region="" version="" mirror=""
  (($#)) || usage
  source="$1"
  shift
  while (($#)); do
    (($# >= 2)) || usage
    case "$1" in
      --region) region="$2" ;;
      --slurm-version) version="$2" ;;
      --mirror) mirror="$2" ;;
      *) usage ;;
    esac
    shift 2
  done
  if [[ -z "$ROOT" && "$(id -u)" -ne 0 ]]; then
    say "ERROR: must run as root"
    exit 1
  fi
  if ! install_files "$source" "$region" "$version" "$mirror"; then
    say "ERROR: fmcluster step install FAILED; the node cannot train without its files (source: $source)"
    record install failed
    exit 1
  fi
  record install "done"
  log INFO "step install: done"
}

# bake SOURCE [OPTIONS]: install, every step of the image (each required), then the mark a later install keeps.
bake() {
  local step
  install "$@"
  BAKING=1
  for step in "${STEP_ORDER[@]}"; do
    if [[ "${STEP_BAKE[$step]}" != boot ]]; then
      run_step "$step"
    fi
  done
  if [[ "$(node_setting FMCLUSTER_NODE_IMAGE)" != baked ]]; then # an image baked from a baked image has it already
    printf 'FMCLUSTER_NODE_IMAGE=baked\n' >>"$SETTINGS"
  fi
  log INFO "image baked: every step of the image is done ($(printf '%s ' "${STEP_ORDER[@]}"))"
}

main() {
  local step="${1:-}"
  [[ -n "$step" ]] || usage
  shift
  if [[ "$step" == install || "$step" == bake ]]; then
    "$step" "$@"
    return 0
  fi
  [[ -n "${STEP_SCRIPT[$step]+set}" ]] || usage
  if [[ ! -f "$NODE_ROOT/node/lib.sh" ]]; then
    say "ERROR: step $step: ${NODE_ROOT#"$ROOT"} holds no node files; run the install step first"
    exit 1
  fi
  run_step "$step" "$@"
}

main "$@"
