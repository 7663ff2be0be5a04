#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# enroot-pyxis.sh: configure the enroot container runtime and the pyxis Slurm plugin, so `srun --container-image=...`
# runs training containers, with enroot's caches and unpacked containers on local disk, not the root volume.
#
# Usage: enroot-pyxis.sh
#
# Both come with the node image; nothing is downloaded (a cluster without an internet path must work the same).
# Local disk: /scratch when it is mounted (the NVMe RAID of nvme-raid.sh), else /opt/sagemaker when it is mounted
# (HyperPod's extra EBS volume, as on the controller), else /tmp. Below it enroot/cache, enroot/data and enroot/tmp
# are made with mode 1777 (enroot keeps one directory per user or group inside).
# Writes /etc/enroot/enroot.conf. Unless the Slurm plugin stack loads pyxis already, writes plugstack.conf.d/pyxis.conf
# in the Slurm configuration directory (/opt/slurm/etc on HyperPod, else /etc/slurm) and makes plugstack.conf include
# that directory. srun and slurmstepd read the plugin stack at every job step, so no daemon is restarted.
# Fails, saying so, when enroot or pyxis is not installed.
# Log: /var/log/fmcluster/enroot-pyxis.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIB="$HERE/lib.sh"
if [[ ! -f "$LIB" ]]; then
  LIB="$(dirname "$HERE")/lib.sh"
fi
# shellcheck source=../lib.sh
source "$LIB"

ENROOT_CONF=/etc/enroot/enroot.conf
LOCAL_DISKS=(/scratch /opt/sagemaker)
SLURM_ETC_DIRS=(/opt/slurm/etc /etc/slurm)
PYXIS_DIRS=(
  /opt/slurm/lib/slurm /opt/slurm/lib64/slurm /usr/local/lib/slurm /usr/local/lib64/slurm
  /usr/lib/x86_64-linux-gnu/slurm /usr/lib/aarch64-linux-gnu/slurm /usr/lib64/slurm /usr/lib/slurm
)
PYXIS_PLUGIN=spank_pyxis.so

# local_disk: the directory enroot keeps its caches under.
local_disk() {
  local disk
  for disk in "${LOCAL_DISKS[@]}"; do
    if mountpoint -q "$ROOT$disk"; then
      printf '%s\n' "$disk"
      return 0
    fi
  done
  printf '/tmp\n'
}

configure_enroot() {
  local base="$1" dir
  for dir in cache data tmp; do
    mkdir -p "$ROOT$base/enroot/$dir"
    chmod 1777 "$ROOT$base/enroot/$dir"
  done
  # enroot expands $(id -u) and $(id -g) itself, for the user who runs it.
  write_file "$ROOT$ENROOT_CONF" 0644 <<EOF
# Written by fmcluster enroot-pyxis.sh; re-run it rather than editing this file.
ENROOT_RUNTIME_PATH /run/enroot/user-\$(id -u)
ENROOT_CACHE_PATH $base/enroot/cache/group-\$(id -g)
ENROOT_DATA_PATH $base/enroot/data/user-\$(id -u)
ENROOT_TEMP_PATH $base/enroot/tmp
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME y
ENROOT_RESTRICT_DEV y
ENROOT_ROOTFS_WRITABLE y
EOF
  if ((FMC_CHANGED)); then
    log INFO "wrote $ENROOT_CONF: caches and containers under $base/enroot"
  fi
}

# pyxis_plugin: the installed path of the pyxis plugin (without FMCLUSTER_ROOT), or nothing.
pyxis_plugin() {
  local dir
  for dir in "${PYXIS_DIRS[@]}"; do
    if [[ -f "$ROOT$dir/$PYXIS_PLUGIN" ]]; then
      printf '%s\n' "$dir/$PYXIS_PLUGIN"
      return 0
    fi
  done
}

# loads_pyxis FILE...: whether a plugin-stack line (not a comment) of any FILE loads pyxis.
loads_pyxis() {
  local file line
  for file in "$@"; do
    if [[ -f "$file" ]]; then
      while IFS= read -r line || [[ -n "$line" ]]; do
        if [[ "$line" != *([[:space:]])\#* && "$line" == *"$PYXIS_PLUGIN"* ]]; then
          return 0
        fi
      done <"$file"
    fi
  done
  return 1
}

configure_pyxis() {
  local plugin etc="" dir stack include line ours file
  local -a lines=() others foreign=()
  plugin="$(pyxis_plugin)"
  if [[ -z "$plugin" ]]; then
    die "pyxis is not installed (no $PYXIS_PLUGIN in ${PYXIS_DIRS[*]}); use a HyperPod image that ships it"
  fi
  for dir in "${SLURM_ETC_DIRS[@]}"; do
    if [[ -d "$ROOT$dir" ]]; then
      etc="$dir"
      break
    fi
  done
  if [[ -z "$etc" ]]; then
    die "no Slurm configuration directory (${SLURM_ETC_DIRS[*]}); is Slurm installed?"
  fi
  stack="$ROOT$etc/plugstack.conf"
  ours="$ROOT$etc/plugstack.conf.d/pyxis.conf"
  shopt -s nullglob
  others=("$ROOT$etc"/plugstack.conf.d/*)
  for file in "${others[@]}"; do
    if [[ "$file" != "$ours" ]]; then
      foreign+=("$file")
    fi
  done
  if loads_pyxis "$stack" ${foreign[@]+"${foreign[@]}"}; then
    log INFO "the Slurm plugin stack in $etc loads pyxis already"
    return 0
  fi
  write_file "$ours" 0644 <<<"required $plugin"
  include="include $etc/plugstack.conf.d/*"
  if [[ -f "$stack" ]]; then
    while IFS= read -r line || [[ -n "$line" ]]; do
      if [[ "$line" == "$include" ]]; then
        log INFO "pyxis ($plugin) is in the Slurm plugin stack"
        return 0
      fi
      lines+=("$line")
    done <"$stack"
  fi
  lines+=("$include")
  write_file "$stack" 0644 < <(printf '%s\n' "${lines[@]}")
  log INFO "pyxis ($plugin) added to the Slurm plugin stack in $etc"
}

main() {
  local base
  if (($#)); then
    printf 'usage: %s\n' "$0" >&2
    exit 2
  fi
  require_root
  if ! command -v enroot >/dev/null 2>&1; then
    die "enroot is not installed; fmcluster never downloads it (nodes may have no internet path): use a HyperPod" \
      "image that ships enroot and pyxis"
  fi
  base="$(local_disk)"
  if [[ "$base" == /tmp ]]; then
    log WARN "neither ${LOCAL_DISKS[*]} is mounted; enroot keeps its caches under /tmp"
  fi
  configure_enroot "$base"
  configure_pyxis
}

main "$@"
