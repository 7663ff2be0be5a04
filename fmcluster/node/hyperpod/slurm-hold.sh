#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# slurm-hold.sh: keep Slurm from giving this node jobs while fmcluster's lifecycle sets it up (a replacement or
# scaled-up node's slurmd can register before OnCreate has mounted /scratch, written the NCCL environment or installed
# enroot/pyxis), and give it back once the lifecycle finished.
#
# Usage: slurm-hold.sh hold             drain this node: State=DRAIN Reason="fmcluster lifecycle running"
#        slurm-hold.sh release          resume it, only if it is still drained for that reason (a drain by an admin,
#                                       by HyperPod's health checks or by Slurm itself is left as it is)
#        slurm-hold.sh fail STEP...     keep it drained, the reason naming the failed steps (HyperPod then replaces it)
#
# The node's Slurm name is its short host name, as HyperPod names Slurm nodes (ip-10-1-0-6; sinfo on any HyperPod
# cluster). scontrol is this image's own (<Slurm prefix>/bin/scontrol: /opt/slurm/bin on HyperPod), by its full path:
# the lifecycle's PATH does not hold /opt/slurm/bin (on_create.sh, observability_step). Draining changes only the
# node's state in slurmctld, not slurm.conf, which HyperPod's cluster agent owns. A node Slurm does not know yet
# (the controller's own group, a node whose slurmd has not registered) or an unreachable slurmctld is no failure:
# the script says so and exits 0 (nothing can take jobs there before the lifecycle ends either).
# Log: /var/log/fmcluster/slurm-hold.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$(dirname "$HERE")/lib.sh" # one layout on every node (fmcluster.node_files): node/hyperpod/ below node/

REASON="fmcluster lifecycle running"

usage() {
  printf 'usage: %s hold | release | fail STEP...\n' "$0" >&2
  exit 2
}

# node_reason SCONTROL NODE: the node's drain reason as slurmctld keeps it ("" when it has none); fails when
# slurmctld does not know the node or cannot be reached.
node_reason() {
  local shown part reason=""
  shown="$("$1" show node "$2" --oneliner 2>/dev/null)" || return 1
  [[ "$shown" == *"NodeName=$2 "* ]] || return 1
  # Reason= is the last field but for its [user@time] suffix; it may hold spaces
  if [[ "$shown" == *" Reason="* ]]; then
    part="${shown#* Reason=}"
    reason="${part% \[*}"
  fi
  printf '%s\n' "$reason"
}

main() {
  local action="${1:-}" scontrol node reason
  [[ "$action" == hold || "$action" == release || "$action" == fail ]] || usage
  shift
  [[ "$action" == fail ]] || (($# == 0)) || usage
  require_root
  scontrol="$ROOT$(slurm_prefix)/bin/scontrol"
  node="$(hostname -s)"
  if [[ ! -x "$scontrol" ]]; then
    log WARN "no $scontrol on this node; Slurm's view of $node is left as it is"
    return 0
  fi
  if ! reason="$(node_reason "$scontrol" "$node")"; then
    log INFO "Slurm does not know node $node (yet), or slurmctld is unreachable; nothing to $action"
    return 0
  fi
  case "$action" in
    hold)
      "$scontrol" update NodeName="$node" State=DRAIN Reason="$REASON"
      log INFO "node $node drained until the fmcluster lifecycle finishes"
      ;;
    release)
      if [[ "$reason" != "$REASON" ]]; then
        log INFO "node $node is not drained by fmcluster's lifecycle (reason: '${reason:-none}'); left as it is"
        return 0
      fi
      "$scontrol" update NodeName="$node" State=RESUME
      log INFO "node $node resumed: the fmcluster lifecycle finished"
      ;;
    fail)
      "$scontrol" update NodeName="$node" State=DRAIN Reason="fmcluster lifecycle failed at $*"
      log INFO "node $node stays drained: the fmcluster lifecycle failed at $*"
      ;;
  esac
}

main "$@"
