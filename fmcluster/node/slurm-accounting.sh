#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# slurm-accounting.sh: the cluster file's users in Slurm's accounting: one account for the cluster, one association
# per user in it, with an equal fair share and a default QoS.
#
# Usage: slurm-accounting.sh apply USERS_FILE ACCOUNT [--wait SECONDS]
#        slurm-accounting.sh sync SSM_PARAMETER_NAME ACCOUNT [--wait SECONDS]
#        slurm-accounting.sh install SSM_PARAMETER_NAME ACCOUNT [--now]
#
# Runs on the node that reaches slurmdbd: the HyperPod controller (where HyperPod runs slurmdbd: SageMaker HyperPod
# guide, "Using an external accounting database") or the AWS PCS login/head node (PCS user guide, "Slurm accounting
# in AWS PCS": accounting commands from a login node's shell; unconfirmed that a lifecycle action reaches it, hence the
# timer). USERS_FILE (or the SSM parameter's value) is the one users.sh reads: `NAME UID ADMIN [KEY...]` lines
# (fmcluster/config/users.py); only NAME is used here.
#
#   apply    with sacctmgr from this image's Slurm (lib.sh slurm_prefix), each only when `sacctmgr show` lacks it:
#              QoS      normal (slurmdbd makes it in a new database; added if missing)
#              account  ACCOUNT under root, Fairshare=1
#              users    one association per NAME in ACCOUNT: DefaultAccount=ACCOUNT Fairshare=1 QOS=normal
#                       DefaultQOS=normal, so every user has the same share and the same default QoS
#            An association that exists is left as it is (an administrator may have changed its share or QoS since).
#            Nothing is ever removed: a user an earlier run added and the file no longer lists keeps its association
#            and its job history (`sacctmgr delete user` refuses a user with running jobs: unconfirmed); one INFO
#            line per such user, at the first run without it, says so and how to remove it. The users added: /var/lib/fmcluster/slurm-accounting.
#            --wait SECONDS: wait that long for slurmdbd to answer (`sacctmgr show cluster`) before giving up.
#   sync     apply to the users read from SSM (`aws ssm get-parameter`, retried).
#   install  a systemd timer (fmcluster-slurm-accounting.timer: 3 minutes after boot, then every 10 minutes) that runs
#            `sync` (users added to the file later get their association without a new node), and with --now a sync
#            at once that waits up to 120 s for slurmdbd (the HyperPod controller, where slurmdbd is up already).
#
# Idempotent: a second apply with the same users runs only `sacctmgr show`. Exit 1 when slurmdbd cannot be reached or
# an add fails (one ERROR line each). Log: /var/log/fmcluster/slurm-accounting.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE_FILE="$ROOT/var/lib/fmcluster/slurm-accounting"
UNIT=fmcluster-slurm-accounting
QOS=normal
SHARE=1
INSTALL_WAIT=120

usage() {
  printf 'usage: %s apply USERS_FILE ACCOUNT [--wait SECONDS]\n' "$0" >&2
  printf '       %s sync SSM_PARAMETER_NAME ACCOUNT [--wait SECONDS]\n' "$0" >&2
  printf '       %s install SSM_PARAMETER_NAME ACCOUNT [--now]\n' "$0" >&2
  exit 2
}

# listed WHAT...: whether `sacctmgr show WHAT...` lists anything.
listed() {
  [[ -n "$(sacctmgr --noheader --parsable2 show "$@")" ]]
}

# add WHAT...: `sacctmgr --immediate add WHAT...`; its output goes to the log, a failure is one ERROR line.
add() {
  local output
  if ! output="$(sacctmgr --immediate add "$@" 2>&1)"; then
    log ERROR "sacctmgr add $* failed: ${output//$'\n'/ }"
    return 1
  fi
}

# reachable SECONDS: slurmdbd answers `sacctmgr show cluster` within about SECONDS (tried at once, then every 5 s).
reachable() {
  local tries=$(($1 / 5 + 1))
  until sacctmgr --noheader --parsable2 show cluster format=cluster >/dev/null 2>&1; do
    tries=$((tries - 1))
    if ((tries <= 0)); then
      return 1
    fi
    sleep 5
  done
}

# login_environment: what a login shell gets for Slurm, since the timer's service is none. PCS puts Slurm on PATH for
# login shells only, in /etc/profile.d/slurm.sh (FACTS.md; what else it sets, e.g. SLURM_CONF, is unconfirmed).
login_environment() {
  local profile="$ROOT/etc/profile.d/slurm.sh"
  if [[ -r "$profile" ]]; then
    set +u # profile scripts are written for login shells, not for `set -u` or errexit (a failing last line is theirs)
    # shellcheck source=/dev/null
    source "$profile" || true
    set -u
  fi
}

apply() {
  local file="$1" account="$2" wait="$3" name failed=0 bin
  local -a names=() kept=()
  login_environment
  bin="$(slurm_prefix)/bin"
  PATH="$ROOT$bin:$PATH"
  if ! command -v sacctmgr >/dev/null 2>&1; then
    log ERROR "no sacctmgr in this image's Slurm ($bin)"
    return 1
  fi
  if ! reachable "$wait"; then
    log ERROR "slurmdbd did not answer (sacctmgr show cluster) within ${wait}s; no association made"
    return 1
  fi
  while read -r name _; do
    if [[ -n "$name" && "$name" != "#"* ]]; then # not an empty line or a comment (users.py NO_USERS)
      names+=("$name")
    fi
  done <"$file"
  if ! listed qos "$QOS" format=name; then
    if add qos "$QOS"; then
      log INFO "QoS $QOS added"
    else
      failed=1
    fi
  fi
  if ! listed account "$account" format=account; then
    if add account "$account" Description="fmcluster users" Organization=fmcluster "Fairshare=$SHARE"; then
      log INFO "account $account added (fair share $SHARE)"
    else
      failed=1
    fi
  fi
  for name in ${names[@]+"${names[@]}"}; do
    if listed association where "user=$name" "account=$account" format=user; then
      kept+=("$name")
      continue
    fi
    if add user "$name" "Account=$account" "DefaultAccount=$account" "Fairshare=$SHARE" "QOS=$QOS" \
      "DefaultQOS=$QOS"; then
      log INFO "$name added to account $account (fair share $SHARE, QoS $QOS)"
      kept+=("$name")
    else
      failed=1
    fi
  done
  report_removed "$account" ${names[@]+"${names[@]}"}
  mkdir -p "$(dirname "$STATE_FILE")"
  printf '%s\n' ${kept[@]+"${kept[@]}"} >"$STATE_FILE"
  return "$failed"
}

# report_removed ACCOUNT NAME...: one line per user an earlier run added that the file no longer lists.
report_removed() {
  local account="$1" name
  shift
  [[ -f "$STATE_FILE" ]] || return 0
  while read -r name; do
    [[ -n "$name" && " $* " != *" $name "* ]] || continue
    log INFO "$name is no longer in the cluster file: its association in $account and its job history are kept" \
      "(remove it with: sacctmgr delete user $name account=$account)"
  done <"$STATE_FILE"
}

install() {
  local parameter="$1" account="$2" now="$3" arguments
  arguments="$(printf ' %q' "$parameter" "$account")"
  install_timed_service "$UNIT" \
    "fmcluster: the cluster file's users in Slurm accounting (associations in account $account)" \
    "/usr/bin/env bash /opt/fmcluster/node/slurm-accounting.sh sync$arguments" network-online.target \
    "fmcluster: the cluster file's users in Slurm accounting, every 10 minutes" OnBootSec=3min OnUnitActiveSec=10min
  log INFO "$UNIT.timer installed: associations for the users of $parameter, 3 minutes after boot and every 10 minutes"
  if [[ "$now" == 1 ]]; then
    sync "$parameter" "$account" "$INSTALL_WAIT"
  fi
}

sync() {
  local parameter="$1" account="$2" wait="$3" tmp status=0
  tmp="$(mktemp)"
  if ! retry aws ssm get-parameter --region "$(region)" --name "$parameter" --query Parameter.Value \
    --output text >"$tmp"; then
    rm -f "$tmp"
    die "could not read the users from SSM parameter $parameter"
  fi
  apply "$tmp" "$account" "$wait" || status=$?
  rm -f "$tmp"
  return "$status"
}

main() {
  local verb="${1:-}" source="${2:-}" account="${3:-}" wait=0 now=0
  (($# >= 3)) || usage
  shift 3
  while (($#)); do
    case "$1" in
      --wait)
        (($# >= 2)) && [[ "$2" =~ ^[0-9]+$ ]] || usage
        wait="$2"
        shift 2
        ;;
      --now)
        now=1
        shift
        ;;
      *) usage ;;
    esac
  done
  require_root
  case "$verb" in
    apply) apply "$source" "$account" "$wait" ;;
    sync) sync "$source" "$account" "$wait" ;;
    install) install "$source" "$account" "$now" ;;
    *) usage ;;
  esac
}

main "$@"
