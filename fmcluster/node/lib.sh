#!/usr/bin/env bash
# shellcheck shell=bash
#
# lib.sh: helpers shared by fmcluster's node scripts. Sourced, never run:
#
#     # shellcheck source=lib.sh
#     source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Gives: log/die (timestamped lines to /var/log/fmcluster/<script>.log and stderr), an ERR trap that logs the
# failing command, require_root, retry (exponential backoff for network calls), imds (IMDSv2), write_file
# (atomic, reports whether the content changed), set_fstab_entry, install_unit, install_boot_unit and
# install_timed_service (systemd), slurm_prefix and slurmd_units (where this image keeps Slurm).
#
# Environment (all optional; none is set on a real node):
#   FMCLUSTER_ROOT            prefix for every file the scripts read or write (/etc, /var/log, /sys, /scratch, ...),
#                             so the tests run them against a scratch directory; when set, the root check is waived.
#   FMCLUSTER_RETRY_ATTEMPTS  attempts per network call; default 5.
#   FMCLUSTER_RETRY_DELAY     seconds before the first retry, doubled after each failure; default 2 (2+4+8+16 s).

if [[ -n "${FMCLUSTER_LIB_LOADED:-}" ]]; then
  return 0
fi
FMCLUSTER_LIB_LOADED=1

ROOT="${FMCLUSTER_ROOT:-}"
SCRIPT_NAME="$(basename "$0" .sh)"
LOG_DIR="$ROOT/var/log/fmcluster"
LOG_FILE="$LOG_DIR/$SCRIPT_NAME.log"
FMC_CHANGED=0

# --- rules rendered from fmcluster's own (node_scripts.NODE_RULES); do not edit here ---
export LUSTRE_MOUNT_NAME_PATTERN='^[A-Za-z0-9_-]{1,8}$'
export LUSTRE_MOUNT_NAME_RULE="1-8 letters, digits, '_' or '-'"
export MOUNT_POINT_PATTERN='^(/[A-Za-z0-9._-]+)+$'
export LUSTRE_DNS_NAME_PATTERN='^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$'
export HOST_NAME_PATTERN='^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$'
export RESERVATION_ID_PATTERN='^cr-[0-9a-f]{17}$'
export TRAINING_PLAN_ARN_FORM='arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[A-Za-z0-9-]{1,64}'
export GROUP_NAME_PATTERN='^[a-z][a-z0-9-]{0,19}$'
export NCCL_ENV_KEY_PATTERN='^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$'
export SHARED_MOUNT='/fsx'
export SHARED_DIRECTORIES='checkpoints=1777 datasets=1777 jobs=1777'
# --- end of rendered rules ---

# region: the AWS region this node runs in (AWS_REGION, AWS_DEFAULT_REGION, else the instance metadata).
region() {
  if [[ -n "${AWS_REGION:-}" ]]; then
    printf '%s\n' "$AWS_REGION"
  elif [[ -n "${AWS_DEFAULT_REGION:-}" ]]; then
    printf '%s\n' "$AWS_DEFAULT_REGION"
  else
    imds meta-data/placement/region
  fi
}

# log LEVEL MESSAGE...: one timestamped line to the script's log file and to stderr (cloud-init keeps stderr too).
log() {
  local level="$1" line
  shift
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ) ${SCRIPT_NAME}[$$] $level: $*"
  mkdir -p "$LOG_DIR"
  printf '%s\n' "$line" >>"$LOG_FILE"
  printf '%s\n' "$line" >&2
}

die() {
  log ERROR "$*"
  exit 1
}

_on_error() {
  # inside `checked`: its subshell's own return re-raises ERR (errtrace); only the command that failed is logged
  ((FMC_CHECKING)) || [[ ${FUNCNAME[1]:-} == checked ]] || log ERROR "line $2: '$3' failed with exit status $1"
}
FMC_CHECKING=0
set -o errtrace
trap '_on_error "$?" "$LINENO" "$BASH_COMMAND"' ERR

# checked COMMAND...: run COMMAND (a function, say) in a subshell where errexit holds, so its first failing command
# stops it, and set CHECKED_STATUS to its exit status. Call it as a plain command, never before `||` or `&&` nor as
# an `if` condition: bash ignores errexit in every command such a list runs, functions included, even after a `set -e`
# inside them (bash manual, The Set Builtin, -e), so `apply || status=$?` would run on past a failed useradd. Changes
# COMMAND makes to variables stay in its subshell; the failing command itself is logged (the ERR trap) once.
checked() {
  set +e
  FMC_CHECKING=1
  (
    FMC_CHECKING=0
    set -e
    "$@"
  )
  # shellcheck disable=SC2034 # read by the caller
  CHECKED_STATUS=$?
  FMC_CHECKING=0
  set -e
}

# require_root: stop unless running as root (waived when FMCLUSTER_ROOT redirects every path, as in the tests).
require_root() {
  if [[ -z "$ROOT" && "$(id -u)" -ne 0 ]]; then
    die "must run as root; try: sudo $0"
  fi
}

# retry COMMAND...: run COMMAND until it succeeds, at most FMCLUSTER_RETRY_ATTEMPTS times, sleeping
# FMCLUSTER_RETRY_DELAY seconds after the first failure and twice as long after each further one.
# COMMAND's output passes through, so `value="$(retry aws ...)"` works. Returns 1 when every attempt failed.
retry() {
  local attempts="${FMCLUSTER_RETRY_ATTEMPTS:-5}" delay="${FMCLUSTER_RETRY_DELAY:-2}" attempt=1
  until "$@"; do
    if ((attempt >= attempts)); then
      log ERROR "giving up after $attempt attempts: $*"
      return 1
    fi
    log WARN "attempt $attempt of $attempts failed: $*; retrying in ${delay}s"
    sleep "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
}

# imds PATH: a value from the instance metadata service over IMDSv2 (the launch template requires tokens),
# e.g. `imds meta-data/instance-type`.
imds() {
  local token
  token="$(retry curl -fsS --connect-timeout 2 --max-time 5 -X PUT \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)"
  retry curl -fsS --connect-timeout 2 --max-time 5 \
    -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/$1"
}

# write_file PATH MODE < CONTENT: replace PATH atomically with stdin. Sets FMC_CHANGED to 1 when the content
# differs from what was there, 0 when the file already held exactly this (nothing is rewritten then).
write_file() {
  local path="$1" mode="$2" content old tmp
  content="$(cat)"
  if [[ -f "$path" ]]; then
    old="$(cat "$path")"
    if [[ "$old" == "$content" ]]; then
      FMC_CHANGED=0
      return 0
    fi
  fi
  mkdir -p "$(dirname "$path")"
  tmp="$(mktemp "$path.XXXXXX")"
  printf '%s\n' "$content" >"$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$path"
  FMC_CHANGED=1
}

# set_fstab_entry MOUNT_POINT ENTRY: make ENTRY the one /etc/fstab line for MOUNT_POINT (a stale line for the
# same mount point, e.g. an old UUID, is replaced; other lines are kept as they are).
set_fstab_entry() {
  local mount_point="$1" entry="$2" fstab="$ROOT/etc/fstab" line
  local -a fields kept=()
  if [[ -f "$fstab" ]]; then
    while IFS= read -r line || [[ -n "$line" ]]; do
      read -r -a fields <<<"$line"
      if [[ "${fields[0]:-#}" != \#* && "${fields[1]:-}" == "$mount_point" ]]; then
        continue
      fi
      kept+=("$line")
    done <"$fstab"
  fi
  kept+=("$entry")
  write_file "$fstab" 0644 < <(printf '%s\n' "${kept[@]}")
  if ((FMC_CHANGED)); then
    log INFO "fstab: $entry"
  fi
}

# install_unit NAME < UNIT: write /etc/systemd/system/NAME and enable it (not start it) when it changed.
install_unit() {
  local name="$1"
  write_file "$ROOT/etc/systemd/system/$name" 0644
  if ((FMC_CHANGED)); then
    systemctl daemon-reload
    systemctl enable "$name"
    log INFO "installed and enabled $name"
  fi
}

# install_boot_unit NAME DESCRIPTION COMMAND WANTED_BY UNIT_LINE...: install_unit a oneshot service NAME that runs
# COMMAND once at boot and stays active (RemainAfterExit: units ordered after it wait until COMMAND has finished),
# pulled in by WANTED_BY; the UNIT_LINEs (After=, Wants=, Before=; one at least) go in its [Unit] section.
install_boot_unit() {
  local name="$1" description="$2" command="$3" wanted_by="$4" ordering
  shift 4
  ordering="$(printf '%s\n' "$@")"
  install_unit "$name" <<EOF
[Unit]
Description=$description
$ordering

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$command

[Install]
WantedBy=$wanted_by
EOF
}

# install_timed_service NAME DESCRIPTION COMMAND AFTER TIMER_DESCRIPTION SCHEDULE_LINE...: NAME.service, a oneshot
# that runs COMMAND (ordered after AFTER; empty: no ordering), and NAME.timer that starts it by its [Timer]
# SCHEDULE_LINEs (OnBootSec=, OnActiveSec=, OnUnitActiveSec=, AccuracySec=); systemd is reloaded when either file
# changed, then the timer enabled and started (a timer started after its OnBootSec has passed runs the service at
# once: systemd catches up elapsed timers).
install_timed_service() {
  local name="$1" description="$2" command="$3" after="$4" timer_description="$5" schedule changed ordering=""
  shift 5
  schedule="$(printf '%s\n' "$@")"
  if [[ -n "$after" ]]; then
    ordering=$'\n'"After=$after"
  fi
  write_file "$ROOT/etc/systemd/system/$name.service" 0644 <<EOF
[Unit]
Description=$description$ordering

[Service]
Type=oneshot
ExecStart=$command
EOF
  changed=$FMC_CHANGED
  write_file "$ROOT/etc/systemd/system/$name.timer" 0644 <<EOF
[Unit]
Description=$timer_description

[Timer]
$schedule

[Install]
WantedBy=timers.target
EOF
  if ((changed || FMC_CHANGED)); then
    systemctl daemon-reload
    log INFO "installed $name.service and $name.timer"
  fi
  systemctl enable --now "$name.timer"
}

# node_setting KEY: KEY's value in /opt/fmcluster/node.env, the settings run-step.sh's install keeps for every later
# step (empty when it has none; the file is read, never run as code).
node_setting() {
  local key value
  [[ -f "$ROOT/opt/fmcluster/node.env" ]] || return 0
  while IFS='=' read -r key value; do
    if [[ "$key" == "$1" ]]; then
      printf '%s\n' "$value"
      return 0
    fi
  done <"$ROOT/opt/fmcluster/node.env"
}

# slurm_prefixes: where this image keeps Slurm (bin/, include/, lib/slurm/), oldest first: /opt/slurm on HyperPod,
# /opt/aws/pcs/scheduler/slurm-<version> on AWS PCS (an image may hold several; PCS user guide, "Install SPANK
# plugins"), else /usr. On PCS with FMCLUSTER_SLURM_VERSION set (run-step.sh install --slurm-version: the cluster's),
# only that version's directory, and nothing (status 1) when the image lacks it: a node must not build against or
# run the Slurm of another version than its controller's (slurmdbd and slurmctld refuse clients newer than themselves:
# Slurm's upgrade guide). When the environment lacks it, the version install kept in /opt/fmcluster/node.env: a
# script that a systemd timer or SSM runs has none of node.env in its environment. slurm_prefix: the last of them.
slurm_prefixes() {
  local dir wanted="${FMCLUSTER_SLURM_VERSION:-}"
  [[ -n "$wanted" ]] || wanted="$(node_setting FMCLUSTER_SLURM_VERSION)"
  local -a found
  if [[ -x "$ROOT/opt/slurm/bin/sinfo" || -d "$ROOT/opt/slurm/etc" ]]; then
    printf '/opt/slurm\n'
    return 0
  fi
  mapfile -t found < <(compgen -G "$ROOT/opt/aws/pcs/scheduler/slurm-*" | sort -V)
  if [[ -n "$wanted" && ${#found[@]} -gt 0 ]]; then
    if [[ -d "$ROOT/opt/aws/pcs/scheduler/slurm-$wanted" ]]; then
      printf '/opt/aws/pcs/scheduler/slurm-%s\n' "$wanted"
      return 0
    fi
    log ERROR "this image has no Slurm $wanted (the cluster's version) under /opt/aws/pcs/scheduler; it has" \
      "${found[*]#"$ROOT/opt/aws/pcs/scheduler/"}"
    return 1
  fi
  if ((${#found[@]} == 0)); then
    printf '/usr\n'
  fi
  for dir in ${found[@]+"${found[@]}"}; do
    printf '%s\n' "${dir#"$ROOT"}"
  done
}

slurm_prefix() {
  local -a prefixes
  mapfile -t prefixes < <(slurm_prefixes)
  printf '%s\n' "${prefixes[-1]}"
}

# slurmd_units: the slurmd unit(s) this image installs, one per line: slurmd.service on HyperPod, another name on
# PCS (unconfirmed which, so it is asked of systemd rather than assumed).
slurmd_units() {
  local line
  while read -r line _; do
    [[ "$line" == slurmd*.service ]] && printf '%s\n' "$line"
  done < <(systemctl list-unit-files --no-legend --no-pager 'slurmd*.service' 2>/dev/null || true)
}

# os_release KEY: a value from /etc/os-release, unquoted.
os_release() {
  local line
  if [[ -f "$ROOT/etc/os-release" ]]; then
    while IFS= read -r line; do
      if [[ "$line" == "$1="* ]]; then
        line="${line#*=}"
        line="${line#\"}"
        printf '%s\n' "${line%\"}"
        return 0
      fi
    done <"$ROOT/etc/os-release"
  fi
}

# write_tunables: AWS's client tunables as module options.
TUNABLES=/etc/modprobe.d/fmcluster-lustre.conf
write_tunables() {
  write_file "$ROOT$TUNABLES" 0644 <<'EOF'
# Written by fmcluster mount-lustre.sh: AWS's FSx for Lustre client tunables (configure-efa-fsx-lustre-client).
options ksocklnd credits=2560
options ptlrpc ptlrpcd_per_cpt_max=32
EOF
  if ((FMC_CHANGED)); then
    log INFO "wrote ${TUNABLES}: ksocklnd credits=2560, ptlrpc ptlrpcd_per_cpt_max=32"
  fi
}
