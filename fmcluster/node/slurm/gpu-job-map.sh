#!/usr/bin/env bash
#
# gpu-job-map.sh: Slurm Prolog and Epilog that tell dcgm-exporter which job runs on which GPU, so its GPU metrics
# carry an `hpc_job` label (dcgm-exporter --hpc-job-mapping-dir /run/fmcluster/dcgm-job-mapping).
#
# slurm.conf: Prolog=/opt/fmcluster/node/slurm/gpu-job-map.sh  Epilog=/opt/fmcluster/node/slurm/gpu-job-map.sh
#
# The mapping directory holds one file per GPU, named by the GPU's index ("0", "1", ...), listing the ids of the jobs
# on that GPU, one per line: the format dcgm-exporter reads (internal/pkg/transformation/hpc.go, tag 4.5.3-4.8.2:
# file names ^\d+(\.\d+)?$, one job per line). The prolog adds SLURM_JOB_ID to the file of every GPU in SLURM_JOB_GPUS
# (Slurm's GPU indexes of the job on this node); the epilog takes the job out of every file and removes files left
# empty. Which of the two runs is told by SLURM_SCRIPT_CONTEXT (prolog_slurmd or epilog_slurmd), or by --prolog /
# --epilog. Files are replaced by a rename under a lock, so dcgm-exporter never reads half a file.
# It always exits 0: a failing Prolog or Epilog drains the node, and a metrics label is never worth that.
set -uo pipefail

dir="${FMCLUSTER_ROOT:-}/run/fmcluster/dcgm-job-mapping"
job="${SLURM_JOB_ID:-}"

warn() {
  printf 'gpu-job-map: %s\n' "$*" >&2
}

# rewrite FILE LINE...: FILE holding exactly LINEs (removed when there are none), replaced by a rename.
rewrite() {
  local file="$1" tmp
  shift
  if (($# == 0)); then
    rm -f "$file"
    return
  fi
  tmp="$(mktemp "$dir/.tmp.XXXXXX")" && printf '%s\n' "$@" >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$file"
}

# jobs_except FILE JOB: the job ids in FILE other than JOB, one per line.
jobs_except() {
  local line
  [[ -f "$1" ]] || return 0
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ -n "$line" && "$line" != "$2" ]] && printf '%s\n' "$line"
  done <"$1"
}

main() {
  local context="${1:-${SLURM_SCRIPT_CONTEXT:-}}" gpu file
  local -a gpus others
  [[ "$job" =~ ^[0-9]+(_[0-9]+)?$ ]] || { warn "no job id (SLURM_JOB_ID='$job'); nothing to map"; return; }
  if ! { mkdir -p "$dir" && chmod 0755 "$dir"; }; then
    warn "cannot create $dir"
    return
  fi
  if ! { exec 9>"$dir/.lock" && flock -w 10 9; }; then
    warn "no lock on $dir/.lock; going on without it"
  fi
  case "$context" in
    prolog_slurmd | --prolog)
      IFS=, read -r -a gpus <<<"${SLURM_JOB_GPUS:-}"
      for gpu in ${gpus[@]+"${gpus[@]}"}; do
        [[ "$gpu" =~ ^[0-9]+$ ]] || continue
        mapfile -t others < <(jobs_except "$dir/$gpu" "$job")
        rewrite "$dir/$gpu" ${others[@]+"${others[@]}"} "$job" || warn "cannot write $dir/$gpu"
      done
      ;;
    epilog_slurmd | --epilog)
      for file in "$dir"/*; do
        [[ -f "$file" && "${file##*/}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || continue
        mapfile -t others < <(jobs_except "$file" "$job")
        rewrite "$file" ${others[@]+"${others[@]}"} || warn "cannot rewrite $file"
      done
      ;;
    *) warn "run as a Slurm Prolog or Epilog (SLURM_SCRIPT_CONTEXT='$context'); nothing done" ;;
  esac
}

main "$@"
exit 0
