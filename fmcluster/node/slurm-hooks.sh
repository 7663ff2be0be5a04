#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# slurm-hooks.sh: fmcluster's Slurm hooks in this node's slurm.conf:
#   TaskProlog=<dir>/slurm/task-prolog.sh   the node's NCCL environment in every task of every job
#   Prolog=<dir>/slurm/gpu-job-map.sh       which job runs on which GPU, for dcgm-exporter's hpc_job label
#   Epilog=<dir>/slurm/gpu-job-map.sh
# where <dir> is this script's directory (/opt/fmcluster/node once installed).
#
# Usage: slurm-hooks.sh
#
# slurm.conf is $SLURM_CONF, else <Slurm prefix>/etc/slurm.conf (/opt/slurm/etc/slurm.conf on HyperPod), or
# /etc/slurm/slurm.conf for a distribution's Slurm. A key that
# slurm.conf sets already to something else is left alone, with a warning (the image's own hook wins). After a change,
# the controller (slurmctld active here) runs `scontrol reconfigure` and a node with an active slurmd restarts it, so
# the daemons read the new file (AWS's HyperPod lifecycle restarts slurmd the same way after its plugin changes).
# On AWS PCS, Slurm runs configless (PCS user guide, "Slurm configuration"): slurm.conf comes from PCS. Prolog and
# Epilog are the cluster's Slurm custom settings (PcsSlurmCluster sets them); TaskProlog is not one PCS takes (PCS API
# reference, SlurmCustomSetting), so jobs there get the NCCL environment only inside containers (enroot's environ.d).
# The script says so and changes nothing.
# Exit status 1 when slurm.conf is missing or cannot be written; a key kept as the image set it is only a warning.
# Log: /var/log/fmcluster/slurm-hooks.log
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

main() {
  local prefix conf key value line name unit changed=0
  local -a lines=() units
  local -A wanted=([TaskProlog]="$HERE/slurm/task-prolog.sh" [Prolog]="$HERE/slurm/gpu-job-map.sh"
    [Epilog]="$HERE/slurm/gpu-job-map.sh")
  require_root
  prefix="$(slurm_prefix)"
  if [[ -z "${SLURM_CONF:-}" && "$prefix" == /opt/aws/pcs/* ]]; then
    log WARN "AWS PCS runs Slurm configless and takes no TaskProlog: jobs outside containers get the submitter's" \
      "environment, not /etc/fmcluster/nccl.env (Prolog and Epilog=${wanted[Prolog]} come from the cluster's Slurm" \
      "custom settings); nothing changed here"
    return 0
  fi
  conf="$ROOT$prefix/etc/slurm.conf"
  if [[ "$prefix" == /usr ]]; then
    conf="$ROOT/etc/slurm/slurm.conf"
  fi
  conf="${SLURM_CONF:-$conf}"
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
    retry scontrol reconfigure
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

main "$@"
