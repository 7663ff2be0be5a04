#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# plan-end-drain.sh: before a SageMaker training plan ends, drain the HyperPod Slurm nodes it provides and ask the jobs
# on them to checkpoint (block-end-drain.sh), from the controller.
#
# Usage: plan-end-drain.sh install REGION PLAN...
#        plan-end-drain.sh check REGION PLAN...
#   PLAN     TRAINING_PLAN_ARN=MINUTES=PARTITION[,PARTITION...]: a plan, its compute[].drain_before_end_minutes and the
#            Slurm partitions of the groups drawing on it (fmcluster names each partition after its group)
#   install  fmcluster-plan-end-drain.timer: `check` 2 minutes after boot (at once when installed later) and every 5
#            minutes, as the capacity-block drain's schedule does
#   check    for each plan, SageMaker DescribeTrainingPlan (`aws sagemaker describe-training-plan --training-plan-name
#            ARN`; botocore sagemaker: TrainingPlanName takes the ARN; Status Pending|Active|Scheduled|Expired|Failed,
#            EndTime), read now, at run time: an Active plan within MINUTES of its EndTime (an extended plan drains at its
#            new end) gets block-end-drain.sh ARN END PARTITION..., which drains the partitions' nodes with Reason
#            "fmcluster: training plan NAME ends END" and sends SIGUSR1 to their job steps; idempotent, so later checks
#            drain only nodes that joined since
# Why on the node: HyperPod's nodes run in SageMaker's account, where SSM Run Command from the block-end Lambda does not
# reach them (unconfirmed that it could); the controller runs slurmctld and reaches SageMaker with the cluster's
# execution role (sagemaker:DescribeTrainingPlan on the plans, fmcluster.constructs.hyperpod.role). When HyperPod stops
# a plan's instances relative to EndTime is unconfirmed: the grace's bounds are the capacity blocks' (EC2 begins 30
# minutes before the end). A failed describe is logged and retried at the next check. FMCLUSTER_NOW (epoch seconds)
# stands for the clock in tests.
# Log: /var/log/fmcluster/plan-end-drain.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

UNIT=fmcluster-plan-end-drain
PLAN_WORD="^($TRAINING_PLAN_ARN_FORM)=([0-9]+)=([a-z][a-z0-9,-]*)\$" # the ARN's form is the cluster file's (lib.sh)

usage() {
  printf 'usage: %s install|check REGION TRAINING_PLAN_ARN=MINUTES=PARTITION[,PARTITION...]...\n' "$0" >&2
  exit 2
}

# check_plan REGION ARN MINUTES PARTITIONS: drain the plan's partitions when it is due.
check_plan() {
  local region="$1" arn="$2" minutes="$3" partitions="$4" shown status end now end_seconds
  local -a names
  if ! shown="$(aws sagemaker describe-training-plan --region "$region" --training-plan-name "$arn" \
    --query '[Status,EndTime]' --output text 2>&1)"; then
    log WARN "training plan $arn could not be read: $shown; checking again in 5 minutes"
    return 1
  fi
  read -r status end <<<"$shown"
  now="${FMCLUSTER_NOW:-$(date -u +%s)}"
  if [[ "$status" != Active || -z "$end" ]] || ! end_seconds="$(date -u -d "$end" +%s 2>/dev/null)"; then
    log INFO "training plan $arn is ${status:-unknown} (ends ${end:-unknown}): nothing to drain"
    return 0
  fi
  if ((now < end_seconds - minutes * 60)); then
    log INFO "training plan $arn ends $end: drained $minutes minutes before, in $(((end_seconds - minutes * 60 - now) / 60)) minutes"
    return 0
  fi
  IFS=, read -r -a names <<<"$partitions"
  log INFO "training plan $arn ends $end, within $minutes minutes: draining ${names[*]}"
  bash "$HERE/block-end-drain.sh" "$arn" "$end" "${names[@]}"
}

install() {
  local arguments
  arguments="$(printf ' %q' "$@")"
  install_timed_service "$UNIT" "fmcluster: drain the Slurm nodes of training plans that end soon" \
    "/usr/bin/env bash /opt/fmcluster/node/plan-end-drain.sh check$arguments" network-online.target \
    "fmcluster: check the training plans' end every 5 minutes" OnBootSec=2min OnUnitActiveSec=5min
  log INFO "$UNIT.timer installed: checks $(($# - 1)) training plan(s) every 5 minutes"
}

main() {
  (($# >= 3)) || usage
  local action="$1" region="$2" word status=0
  [[ "$action" == install || "$action" == check ]] || usage
  for word in "${@:3}"; do
    [[ "$word" =~ $PLAN_WORD ]] || usage
  done
  require_root
  if [[ "$action" == install ]]; then
    install "${@:2}"
    return 0
  fi
  for word in "${@:3}"; do
    [[ "$word" =~ $PLAN_WORD ]]
    check_plan "$region" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" || status=1
  done
  return "$status"
}

main "$@"
