#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# image-check.sh: the self-check of a baked node image, run by EC2 Image Builder's validate phase (on the build
# instance) and test phase (on a new instance launched from the image): what `run-step.sh bake` put on the image is
# there and loads.
#
# Usage: image-check.sh --slurm-version VERSION
#
# Checks, each one line, every failure named (exit 1 when any fails):
#   baked      /opt/fmcluster/node.env says FMCLUSTER_NODE_IMAGE=baked (the bake ran every image step)
#   updates    package-updates.sh's two files hold their lines (needrestart never restarts slurmd; no unattended
#              upgrades), on Ubuntu and Debian
#   enroot     `enroot version` runs
#   pyxis      spank_pyxis.so is in the plugin directory of Slurm VERSION on the image (the cluster's), every library it
#              links is found (ldd), and a plugin-stack file of that Slurm loads it
#   gpu        where `nvidia-smi -L` lists a GPU: `nvidia-container-cli info` works (enroot's 98-nvidia hook needs it)
#   efa        where /sys/class/infiniband lists a device: `fi_info -p efa` lists the EFA provider
# GPU and EFA are checked only where the instance has them: Image Builder builds and tests on the infrastructure
# configuration's instance types (fmcluster.constructs.node_image: c6i/m6i, no GPU, no EFA), so there the image's
# driver and EFA stack are not exercised, and this script says so.
# Log: /var/log/fmcluster/image-check.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

PYXIS_PLUGIN=spank_pyxis.so
FAILED=()

check() {
  local name="$1"
  shift
  if "$@"; then
    log INFO "image check $name: ok"
  else
    log ERROR "image check $name: FAILED"
    FAILED+=("$name")
  fi
}

# has_line FILE LINE: whether FILE holds LINE as a whole line.
has_line() {
  local line
  [[ -f "$1" ]] || return 1
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" == "$2" ]] && return 0
  done <"$1"
  return 1
}

baked() {
  has_line "$ROOT/opt/fmcluster/node.env" FMCLUSTER_NODE_IMAGE=baked
}

updates() {
  case "$(os_release ID)" in
    ubuntu | debian) ;;
    *) return 0 ;;
  esac
  # shellcheck disable=SC2016 # needrestart's Perl, not a shell expansion
  has_line "$ROOT/etc/needrestart/conf.d/90-fmcluster-slurmd.conf" '$nrconf{override_rc}{qr(^slurmd)} = 0;' &&
    has_line "$ROOT/etc/apt/apt.conf.d/99-fmcluster-no-unattended-upgrades" 'APT::Periodic::Unattended-Upgrade "0";'
}

enroot_runs() {
  enroot version >/dev/null
}

# loads_pyxis FILE...: whether a line of any FILE names the pyxis plugin.
loads_pyxis() {
  local file line
  for file in "$@"; do
    [[ -f "$file" ]] || continue
    while IFS= read -r line || [[ -n "$line" ]]; do
      [[ "$line" == *"$PYXIS_PLUGIN"* ]] && return 0
    done <"$file"
  done
  return 1
}

pyxis() {
  local prefix plugin dir missing line
  prefix="$(slurm_prefix)" || return 1
  plugin="$ROOT$prefix/lib/slurm/$PYXIS_PLUGIN"
  if [[ ! -f "$plugin" ]]; then
    log ERROR "$prefix/lib/slurm/$PYXIS_PLUGIN is missing"
    return 1
  fi
  missing=""
  while IFS= read -r line; do
    if [[ "$line" == *"not found"* ]]; then
      missing+="${line#"${line%%[![:space:]]*}"}; "
    fi
  done < <(ldd "$plugin")
  if [[ -n "$missing" ]]; then
    log ERROR "$prefix/lib/slurm/$PYXIS_PLUGIN links libraries the image lacks: $missing"
    return 1
  fi
  shopt -s nullglob
  for dir in "/etc/aws/pcs/scheduler/${prefix##*/}" /opt/slurm/etc /etc/slurm; do
    if loads_pyxis "$ROOT$dir/plugstack.conf" "$ROOT$dir"/plugstack.conf.d/*; then
      return 0
    fi
  done
  log ERROR "no Slurm plugin-stack file of $prefix loads $PYXIS_PLUGIN"
  return 1
}

gpu() {
  nvidia-container-cli info >/dev/null
}

efa() {
  fi_info -p efa >/dev/null
}

main() {
  if (($# != 2)) || [[ "$1" != --slurm-version ]]; then
    printf 'usage: %s --slurm-version VERSION\n' "$0" >&2
    exit 2
  fi
  export FMCLUSTER_SLURM_VERSION="$2"
  check baked baked
  check updates updates
  check enroot enroot_runs
  check pyxis pyxis
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    check gpu gpu
  else
    log INFO "image check gpu: not checked, this instance has no NVIDIA GPU"
  fi
  if compgen -G "$ROOT/sys/class/infiniband/*" >/dev/null; then
    check efa efa
  else
    log INFO "image check efa: not checked, this instance has no EFA device"
  fi
  if ((${#FAILED[@]})); then
    die "the baked image failed its checks: ${FAILED[*]} (log: ${LOG_FILE#"$ROOT"})"
  fi
  log INFO "the baked image passed its checks"
}

main "$@"
