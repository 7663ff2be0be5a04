#!/usr/bin/env bash
#
# task-prolog.sh: Slurm TaskProlog: the node's NCCL environment (/etc/fmcluster/nccl.env, written by nccl-env.sh from
# the compute group's settings) in every task of every job, batch scripts included. sbatch hands a job the submitter's
# environment (a login node's, or none of fmcluster's), and batch jobs are no login shells, so /etc/profile.d alone
# never reaches them.
#
# slurm.conf: TaskProlog=/opt/fmcluster/node/slurm/task-prolog.sh
#
# Slurm runs it as the job's user before each task and sets every `export NAME=value` line it prints in the task's
# environment (slurm.conf(5), TaskProlog), over what the job brought. To keep a value of its own for some variables,
# a job names them, comma-separated, in FMCLUSTER_NCCL_KEEP (e.g. FMCLUSTER_NCCL_KEEP=NCCL_DEBUG).
# Only NCCL_*, FI_* and OFI_NCCL_* names are exported; a missing file exports nothing. Never fails a task.
set -uo pipefail

# --- rules rendered from fmcluster's own (node_scripts.NODE_RULES); do not edit here ---
export NCCL_ENV_KEY_PATTERN='^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$'
# --- end of rendered rules ---

env_file="${FMCLUSTER_ROOT:-}/etc/fmcluster/nccl.env"
keep=",${FMCLUSTER_NCCL_KEEP:-},"
[[ -r "$env_file" ]] || exit 0
while IFS= read -r line || [[ -n "$line" ]]; do
  name="${line%%=*}"
  if [[ "$line" == *=* && "$name" =~ $NCCL_ENV_KEY_PATTERN && "$keep" != *",$name,"* ]]; then
    printf 'export %s\n' "$line"
  fi
done <"$env_file"
exit 0
