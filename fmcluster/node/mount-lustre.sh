#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# mount-lustre.sh: mount an FSx for Lustre file system, over EFA when the file system is EFA-enabled.
#
# Usage: mount-lustre.sh DNS_NAME MOUNT_NAME [MOUNT_POINT] [--efa]
#        mount-lustre.sh --tunables   (fmcluster-lustre-tunables.service, at every boot once Lustre is mounted)
#
#   DNS_NAME     the file system's DNS name, e.g. fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com
#   MOUNT_NAME   its mount name (FileSystem.LustreConfiguration.MountName), e.g. abcdef12
#   MOUNT_POINT  where to mount it; default /fsx
#   --efa        the file system is EFA-enabled: set up this client's LNet for EFA first (lnet-efa.sh beside this
#                script, from the node bundle), where this node can be an FSx EFA client; otherwise, when the set-up
#                fails or lnet-efa.sh is missing, the file system is mounted over TCP, with a warning. The fstab line
#                orders the boot-time mount after fmcluster-lnet-efa.service (x-systemd.after=) without requiring it:
#                x-systemd.requires= adds Requires= (systemd.mount(5)), and a required unit that fails (lnet-efa.sh
#                --boot exits 3 whenever it falls back to TCP) stops the mount (systemd.unit(5), Requires=), so the
#                TCP fallback would work at first boot only and a reboot would leave no file system.
#
# Installs nothing: the image must carry the FSx Lustre client for its running kernel, the `lustre` kernel module
# (`modinfo lustre`) and the mount helper `mount.lustre`; without either the script fails naming what is missing, and on
# PCS the lustre step's onError TERMINATE ends the node. The supported images carry it: HyperPod's AMI (HyperPod mounts
# FSx itself; awsome-distributed-training base-config/hotfix/hold-lustre-client.sh holds the installed client) and the
# DLAMIs for Ubuntu 24.04, which install FSx's lustre-client-modules-<kernel> with each kernel (DLAMI release notes, e.g.
# Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.11 (Ubuntu 24.04) 20260815, added packages:
# linux-image-6.17.0-1020-aws with lustre-client-modules-6.17.0-1020-aws 2.15.6-1fsx33); that the PCS-Ready DLAMI
# keeps that package is (unconfirmed): its release notes list none. The client is not fetched at boot because its
# packages are kernel-specific and come from AWS's FSx client repository, a public host outside the VPC's S3 gateway
# endpoint (a bucket's endpoint serves only its own region): no node reaches the internet to become ready.
# Writes one /etc/fstab line (`_netdev,noatime,flock`) and mounts with retries (the file system's DNS name can
# take a moment to resolve from a fresh node). Does nothing when MOUNT_POINT is already mounted. No /fsx is a failure.
# Client tunables in /etc/modprobe.d/fmcluster-lustre.conf, as AWS's configure-efa-fsx-lustre-client writes them for
# EFA clients and the FSx performance tips give for clients with 64 or more vCPUs: `options ksocklnd credits=2560`,
# `options ptlrpc ptlrpcd_per_cpt_max=32` (module options: they apply when the modules next load).
# Post-mount tunables, from the FSx for Lustre user guide ("Performance tips", recommended client tuning), with
# `lctl set_param` now and at every boot (fmcluster-lustre-tunables.service: "lctl set_param is known to not persist
# over reboot", the guide says, recommending a boot job): on clients with more than 64 GiB of memory
# ldlm.namespaces.*.lru_max_age=600000 and ldlm.namespaces.*.lru_size=<100 x CPUs>; on clients with 64 or more vCPUs
# osc.*OST*.max_rpcs_in_flight=32, mdc.*.max_rpcs_in_flight=64 and mdc.*.max_mod_rpcs_in_flight=50. A setting that
# fails is a warning: the file system works without it.
# Log: /var/log/fmcluster/mount-lustre.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LNET_UNIT=fmcluster-lnet-efa.service
TUNABLES_UNIT=fmcluster-lustre-tunables.service
# the guide's "more than 64 GiB of memory" and "64 vCPU cores" (or more)
LRU_MIN_MEMORY_KIB=$((64 * 1024 * 1024))
RPC_MIN_CPUS=64

usage() {
  printf 'usage: %s DNS_NAME MOUNT_NAME [MOUNT_POINT] [--efa]\n' "$0" >&2
  exit 2
}

# check_lustre_client: the running kernel's lustre module and mount.lustre are on the image; else fails naming what
# is missing (nothing is installed: see the header).
check_lustre_client() {
  local what=""
  if ! modinfo lustre >/dev/null 2>&1; then
    what="the lustre kernel module for kernel $(uname -r) (modinfo lustre)"
  fi
  if ! command -v mount.lustre >/dev/null 2>&1 && [[ ! -x "$ROOT/sbin/mount.lustre" ]]; then
    what+="${what:+ and }the mount helper mount.lustre"
  fi
  if [[ -n "$what" ]]; then
    die "this image has no FSx Lustre client: $what missing; fmcluster installs none at boot: use an image that" \
      "carries it (docs/node-images.md)"
  fi
  log INFO "Lustre client present"
}

# apply_tunables: the FSx guide's post-mount client tunables for this node's size (see the header). MemTotal is the
# first line of /proc/meminfo (fs/proc/meminfo.c).
apply_tunables() {
  local cpus memory=0 setting
  local -a settings=()
  cpus="$(nproc)"
  read -r _ memory _ <"$ROOT/proc/meminfo" || true
  if ((memory > LRU_MIN_MEMORY_KIB)); then
    settings+=("ldlm.namespaces.*.lru_max_age=600000" "ldlm.namespaces.*.lru_size=$((100 * cpus))")
  fi
  if ((cpus >= RPC_MIN_CPUS)); then
    settings+=("osc.*OST*.max_rpcs_in_flight=32" "mdc.*.max_rpcs_in_flight=64" "mdc.*.max_mod_rpcs_in_flight=50")
  fi
  for setting in ${settings[@]+"${settings[@]}"}; do
    lctl set_param "$setting" >/dev/null || log WARN "lctl set_param $setting failed; Lustre works without it"
  done
}

main() {
  local efa=0 arg dns_name mount_name mount_point options device
  local -a positional=()
  if [[ "${1:-}" == --tunables ]]; then
    (($# == 1)) || usage
    require_root
    apply_tunables
    return 0
  fi
  for arg in "$@"; do
    case "$arg" in
      --efa) efa=1 ;;
      -*) usage ;;
      *) positional+=("$arg") ;;
    esac
  done
  require_root
  if ((${#positional[@]} < 2 || ${#positional[@]} > 3)); then
    usage
  fi
  dns_name="${positional[0]}"
  mount_name="${positional[1]}"
  mount_point="${positional[2]:-/fsx}"
  [[ "$dns_name" =~ $LUSTRE_DNS_NAME_PATTERN && "$dns_name" =~ $HOST_NAME_PATTERN ]] ||
    die "DNS_NAME must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got '$dns_name'"
  [[ "$mount_name" =~ $LUSTRE_MOUNT_NAME_PATTERN ]] ||
    die "MOUNT_NAME must be the file system's mount name, $LUSTRE_MOUNT_NAME_RULE (e.g. abcdef12); got '$mount_name'"
  [[ "$mount_point" =~ $MOUNT_POINT_PATTERN ]] ||
    die "MOUNT_POINT must be an absolute directory like /fsx; got '$mount_point'"

  if mountpoint -q "$ROOT$mount_point"; then
    log INFO "$mount_point is already mounted; nothing to do"
    return 0
  fi
  check_lustre_client

  device="$dns_name@tcp:/$mount_name"
  options="defaults,_netdev,noatime,flock"
  if ((efa)) && [[ ! -x "$SCRIPT_DIR/lnet-efa.sh" ]]; then
    log WARN "no $SCRIPT_DIR/lnet-efa.sh (it comes in the node bundle); mounting over TCP"
  elif ((efa)) && "$SCRIPT_DIR/lnet-efa.sh"; then
    # the boot-time mount waits for (and needs) the LNet set-up
    options+=",x-systemd.after=$LNET_UNIT"
  elif (($(nproc) >= 64)); then
    write_tunables
  fi
  set_fstab_entry "$mount_point" "$device $mount_point lustre $options 0 0"
  mkdir -p "$ROOT$mount_point"
  retry mount -t lustre -o noatime,flock "$device" "$ROOT$mount_point"
  log INFO "mounted $device at $mount_point"
  apply_tunables
  install_boot_unit "$TUNABLES_UNIT" "fmcluster: Lustre client tunables" "$SCRIPT_DIR/mount-lustre.sh --tunables" \
    multi-user.target After=remote-fs.target
}

main "$@"
