#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# block-end-drain.sh: before a capacity block or a training plan ends, drain its Slurm nodes and ask the jobs on them to
# checkpoint.
#
# Usage: block-end-drain.sh RESERVATION_ID|TRAINING_PLAN_ARN END PARTITION...
#   RESERVATION_ID  the block's capacity reservation (cr- + 17 hex digits), named in the drain reason; or
#   TRAINING_PLAN_ARN  a SageMaker training plan (HyperPod), whose name is in the reason instead
#   END             the block's end as EC2 reports it (ISO 8601, e.g. 2026-12-14T10:00:00Z), named in the reason
#   PARTITION       a Slurm partition of the block's nodes (fmcluster names each after its compute group)
#
# Run as root on any node of the cluster: the block-end Lambda (fmcluster/lambdas/block_end) sends it through SSM Run
# Command (AWS-RunShellScript runs as root) drain_before_end_minutes before the block's end; on HyperPod the
# controller's plan-end-drain.sh timer runs it before a training plan's end. root may change node
# states from any node of the cluster (Slurm treats uid 0 as an administrator; scontrol(1), "update").
#
# What it does:
#   1. every node of the partitions not yet drained for this block gets State=DRAIN with
#      Reason="fmcluster: capacity block RESERVATION_ID ends END" (or "fmcluster: training plan NAME ends END"): no
#      new job starts there, running jobs go on;
#   2. every job running on those nodes gets SIGUSR1 in its job steps: `scancel --signal=USR1 JOB` without --batch or
#      --full signals the job's steps and not its batch shell (scancel(1)), the processes that `srun` started. That is
#      the signal examples/jobs/train.sbatch asks Slurm for before a time limit (--signal=USR1@120), on which
#      examples/jobs/train.py checkpoints and exits 3.
# Idempotent: nodes already drained for this block, and their jobs, are left alone, so a second run (the Lambda
# checks every 5 minutes) drains and signals only nodes that joined since, such as a replacement node.
# Output: one line on stdout for the caller, "drained N node(s): LIST; signalled M job(s): LIST" (LIST "-" when
# empty); progress in /var/log/fmcluster/block-end-drain.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# Run by SSM, not by run-step.sh: slurm_prefixes reads the cluster's Slurm version from the settings the install step
# kept (lib.sh), never the newest of the image's several

# the reservation, plan and partition rules are the cluster file's (lib.sh's rendered rules)
PLAN_PATTERN="^$TRAINING_PLAN_ARN_FORM\$"
END_PATTERN='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+)$'

usage() {
  printf 'usage: %s RESERVATION_ID|TRAINING_PLAN_ARN END PARTITION...\n' "$0" >&2
  exit 2
}

# joined LIST...: the words joined with ',' ("-" when there are none).
joined() {
  local IFS=,
  printf '%s\n' "${*:--}"
}

main() {
  (($# >= 3)) || usage
  local reservation="$1" end="$2" bin reason node state rest
  shift 2
  if [[ "$reservation" =~ $RESERVATION_ID_PATTERN ]]; then
    reason="fmcluster: capacity block $reservation ends $end"
  elif [[ "$reservation" =~ $PLAN_PATTERN ]]; then
    reason="fmcluster: training plan ${reservation##*/} ends $end"
  else
    usage
  fi
  [[ "$end" =~ $END_PATTERN ]] || usage
  local partition
  for partition in "$@"; do
    [[ "$partition" =~ $GROUP_NAME_PATTERN ]] || usage
  done
  require_root
  bin="$ROOT$(slurm_prefix)/bin"

  local -a fresh=() jobs=()
  local -A seen=()
  # %N node, %T state, %E reason (the last field: it may hold spaces); -N: one line per node and partition
  while read -r node state rest; do
    [[ -n "$node" && -z "${seen[$node]:-}" ]] || continue
    seen[$node]=1
    if [[ "$rest" == "$reason" ]]; then
      continue
    fi
    fresh+=("$node")
    log INFO "node $node ($state${rest:+, reason: $rest}) to drain: $reason"
  done < <("$bin/sinfo" --noheader --Node --partition="$(joined "$@")" --format='%N %T %E')

  if ((${#fresh[@]} > 0)); then
    "$bin/scontrol" update NodeName="$(joined "${fresh[@]}")" State=DRAIN Reason="$reason"
    mapfile -t jobs < <("$bin/squeue" --noheader --states=RUNNING --nodelist="$(joined "${fresh[@]}")" \
      --format='%A' | sort -un)
  fi
  if ((${#jobs[@]} > 0)); then
    "$bin/scancel" --signal=USR1 "${jobs[@]}"
    log INFO "signalled USR1 to the steps of job(s) ${jobs[*]} to checkpoint"
  fi
  printf 'drained %d node(s): %s; signalled %d job(s): %s\n' "${#fresh[@]}" "$(joined "${fresh[@]}")" \
    "${#jobs[@]}" "$(joined "${jobs[@]}")"
}

main "$@"
