#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# slurm-hooks.sh: fmcluster's Slurm hooks on this node, through the extension points the node's Slurm offers:
#   slurm/gpu-job-map.sh    Prolog and Epilog: which job runs on which GPU, for dcgm-exporter's hpc_job label
#   slurm/task-prolog.sh    TaskProlog: the node's NCCL environment in every task of every job
# (slurm/ beside this script: /opt/fmcluster/node/slurm once installed).
#
# Usage: slurm-hooks.sh
#
# SageMaker HyperPod (Slurm under /opt/slurm): slurm.conf is HyperPod's. AWS warns that its cluster agent rewrites
# /opt/slurm/etc/slurm.conf on scaling, node replacement and cluster updates (FACTS.md, "Node images"), so a line
# appended there vanishes silently. What HyperPod keeps: its AMI's Prolog/Epilog directories /opt/slurm/etc/prolog.d
# and epilog.d, which it sets up itself when the lifecycle runs as OnInitComplete, as fmcluster's does, and its own
# GPU job map, prolog.d/700_dcgm_job_map_register.sh and epilog.d/700_dcgm_job_map_cleanup.sh, writing
# /run/slurm/dcgm-job-mapping (awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/Extensions/
# observability/README.md, "GPU-to-job-ID mapping"). So here:
#   - slurm.conf is only read, never written, and no daemon is reconfigured or restarted;
#   - the AMI's job map is used when it is there (observability.sh points dcgm-exporter at /run/slurm/dcgm-job-mapping);
#     without it, gpu-job-map.sh is linked into prolog.d and epilog.d as 710-fmcluster-gpu-job-map.sh (after the
#     AMI's 700_*), when slurm.conf's Prolog/Epilog name those directories; otherwise a warning says GPU metrics carry
#     no job label;
#   - no TaskProlog: HyperPod offers no directory for one (unconfirmed that it would keep a TaskProlog line; AWS's own
#     base-config start_slurm.sh appends one, which the agent may drop), so jobs get the NCCL environment inside
#     containers (nccl-env.sh's enroot hook) and from /etc/fmcluster/nccl.env for host jobs that source it; the script
#     says so.
# AWS PCS (Slurm under /opt/aws/pcs): Slurm runs configless (PCS user guide, "Slurm configuration"): slurm.conf comes
# from PCS. Prolog and Epilog are the cluster's Slurm custom settings (PcsSlurmCluster sets them); TaskProlog is not
# one PCS takes (PCS API reference, SlurmCustomSetting), so jobs there get the NCCL environment only inside containers.
# The script says so and changes nothing.
# A Slurm of the node's own (/usr, or SLURM_CONF): nobody else owns slurm.conf, so the three keys are added to it
# (/etc/slurm/slurm.conf, or $SLURM_CONF). A key slurm.conf sets already to something else is left alone, with a
# warning (the image's own hook wins). After a change, the controller (slurmctld active here) runs
# `<Slurm prefix>/bin/scontrol reconfigure` (by its full path: a lifecycle's PATH may lack Slurm's bin) and a node with
# an active slurmd restarts it, so the daemons read the new file.
# Exit status 1 when slurm.conf is missing or cannot be written; a key kept as the image set it is only a warning.
# Log: /var/log/fmcluster/slurm-hooks.log
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

GPU_JOB_MAP_HOOK=710-fmcluster-gpu-job-map.sh
AMI_JOB_MAP=prolog.d/700_dcgm_job_map_register.sh

# slurm_conf_names CONF KEY DIR: whether slurm.conf's KEY (Prolog or Epilog) names DIR's scripts (DIR/* or a list
# holding it).
slurm_conf_names() {
  local conf="$1" key="$2" dir="$3" line value
  [[ -f "$conf" ]] || return 1
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "${line%%=*}" == "$key" ]]; then
      value="${line#*=}"
      [[ ",$value," == *",$dir/*,"* ]] && return 0
    fi
  done <"$conf"
  return 1
}

# hyperpod_hooks ETC: the GPU job map through HyperPod's prolog.d/epilog.d (see the header); slurm.conf only read.
hyperpod_hooks() {
  local etc="$1" kind missing=0
  if [[ -f "$ROOT$etc/$AMI_JOB_MAP" ]]; then
    log INFO "HyperPod's AMI maps jobs to GPUs itself ($etc/$AMI_JOB_MAP, /run/slurm/dcgm-job-mapping); nothing added"
  else
    for kind in Prolog Epilog; do
      if ! slurm_conf_names "$ROOT$etc/slurm.conf" "$kind" "$etc/${kind,,}.d"; then
        missing=1
      fi
    done
    if ((missing)); then
      log WARN "HyperPod's slurm.conf runs no $etc/prolog.d and epilog.d scripts and its AMI has no GPU job map:" \
        "GPU metrics carry no hpc_job label (slurm.conf is HyperPod's and is not changed)"
    else
      for kind in prolog epilog; do
        mkdir -p "$ROOT$etc/$kind.d"
        if [[ "$(readlink "$ROOT$etc/$kind.d/$GPU_JOB_MAP_HOOK" || true)" != "$HERE/slurm/gpu-job-map.sh" ]]; then
          ln -sfn "$HERE/slurm/gpu-job-map.sh" "$ROOT$etc/$kind.d/.$GPU_JOB_MAP_HOOK.new"
          mv -T "$ROOT$etc/$kind.d/.$GPU_JOB_MAP_HOOK.new" "$ROOT$etc/$kind.d/$GPU_JOB_MAP_HOOK"
        fi
      done
      log INFO "GPU job map: $etc/prolog.d and epilog.d/$GPU_JOB_MAP_HOOK -> $HERE/slurm/gpu-job-map.sh"
    fi
  fi
  log INFO "HyperPod keeps no TaskProlog of fmcluster's: container jobs get the NCCL environment from enroot's hook," \
    "host jobs by sourcing /etc/fmcluster/nccl.env; slurm.conf is left as HyperPod wrote it"
}

# own_slurm_hooks PREFIX CONF: the three keys in a slurm.conf nobody else manages.
own_slurm_hooks() {
  local prefix="$1" conf="$2" key value line name unit changed=0
  local -a lines=() units
  local -A wanted=([TaskProlog]="$HERE/slurm/task-prolog.sh" [Prolog]="$HERE/slurm/gpu-job-map.sh"
    [Epilog]="$HERE/slurm/gpu-job-map.sh")
  [[ -f "$conf" ]] || die "no slurm.conf at $conf; is Slurm set up on this node?"
  while IFS= read -r line || [[ -n "$line" ]]; do
    name="${line%%=*}"
    name="${name//[[:space:]]/}"
    if [[ -n "${wanted[$name]+set}" && "$line" != \#* ]]; then
      value="${line#*=}"
      if [[ "$value" != "${wanted[$name]}" ]]; then
        log WARN "slurm.conf sets $name=$value already; keeping it, so fmcluster's ${wanted[$name]##*/} does not run"
      fi
      unset "wanted[$name]"
    fi
    lines+=("$line")
  done <"$conf"
  for key in TaskProlog Prolog Epilog; do
    if [[ -n "${wanted[$key]+set}" ]]; then
      lines+=("$key=${wanted[$key]}")
      changed=1
    fi
  done
  if ((changed == 0)); then
    log INFO "slurm.conf has fmcluster's hooks (or the image's own); nothing to change"
    return 0
  fi
  write_file "$conf" 0644 < <(printf '%s\n' "${lines[@]}")
  log INFO "added fmcluster's Slurm hooks to $conf"
  if systemctl is-active --quiet slurmctld; then
    retry "$ROOT$prefix/bin/scontrol" reconfigure
    log INFO "slurmctld reconfigured"
  fi
  mapfile -t units < <(slurmd_units)
  for unit in ${units[@]+"${units[@]}"}; do
    if systemctl is-active --quiet "$unit"; then
      systemctl restart "$unit"
      log INFO "restarted $unit"
    fi
  done
}

main() {
  local prefix conf
  require_root
  prefix="$(slurm_prefix)"
  if [[ -z "${SLURM_CONF:-}" && "$prefix" == /opt/aws/pcs/* ]]; then
    log WARN "AWS PCS runs Slurm configless and takes no TaskProlog: jobs outside containers get the submitter's" \
      "environment, not /etc/fmcluster/nccl.env (Prolog and Epilog=$HERE/slurm/gpu-job-map.sh come from the" \
      "cluster's Slurm custom settings); nothing changed here"
    return 0
  fi
  if [[ -z "${SLURM_CONF:-}" && "$prefix" == /opt/slurm ]]; then
    hyperpod_hooks /opt/slurm/etc
    return 0
  fi
  conf="${SLURM_CONF:-$ROOT/etc/slurm/slurm.conf}"
  own_slurm_hooks "$prefix" "$conf"
}

main "$@"
