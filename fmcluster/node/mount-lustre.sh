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
# Checks that the Lustre client module is installed for the running kernel and installs it when it is not (Amazon
# Linux 2023: dnf; Amazon Linux 2: amazon-linux-extras; both in-region S3 through the gateway endpoint; Ubuntu and RHEL:
# AWS's FSx client repository). KNOWN GAP (issue 22, open): the FSx client repository is a public S3 host outside the
# region's gateway endpoint (a bucket's endpoint serves only its own region), so on Ubuntu/RHEL it needs
# `network.egress: nat`; whether the PCS-Ready DLAMI carries the client is unconfirmed (its release notes list none),
# and the artifact mirror does not hold the kernel-specific client packages yet. Kept, rather than failing every
# such node (on PCS a failed lustre step terminates the node, and a static group would relaunch it in a loop).
# writes one /etc/fstab line (`_netdev,noatime,flock`) and mounts with retries (the file system's DNS name can
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


lustre_client_installed() {
  modinfo lustre >/dev/null 2>&1
}

install_lustre_client() {
  local id version codename keyring
  id="$(os_release ID)"
  version="$(os_release VERSION_ID)"
  log INFO "installing the Lustre client ($id $version)"
  case "$id" in
    amzn)
      if [[ "$version" == 2 ]]; then
        retry amazon-linux-extras install -y lustre
      else
        retry dnf install -y lustre-client
      fi
      ;;
    ubuntu)
      codename="$(os_release VERSION_CODENAME)"
      keyring="$ROOT/usr/share/keyrings/fsx-ubuntu-public-key.gpg"
      mkdir -p "$(dirname "$keyring")"
      retry curl -fsSL -o "$keyring.asc" \
        https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc
      gpg --batch --yes --dearmor -o "$keyring" "$keyring.asc"
      write_file "$ROOT/etc/apt/sources.list.d/fsxlustreclientrepo.list" 0644 <<EOF
deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $codename main
EOF
      retry apt-get update
      retry env DEBIAN_FRONTEND=noninteractive apt-get install -y "lustre-client-modules-$(uname -r)"
      ;;
    rhel | rocky | almalinux | centos)
      retry curl -fsSL -o "$ROOT/tmp/fsx-rpm-public-key.asc" \
        https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-rpm-public-key.asc
      rpm --import "$ROOT/tmp/fsx-rpm-public-key.asc"
      retry curl -fsSL -o "$ROOT/etc/yum.repos.d/aws-fsx.repo" \
        "https://fsx-lustre-client-repo.s3.amazonaws.com/el/${version%%.*}/fsx-lustre-client.repo"
      retry dnf install -y kmod-lustre-client lustre-client
      ;;
    *)
      die "no Lustre client for OS '$id' here; use an AMI that has one (the AWS Deep Learning AMIs, the AWS PCS sample AMIs)"
      ;;
  esac
  lustre_client_installed || die "the Lustre client installed, but modinfo finds no lustre module for kernel $(uname -r)"
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
  [[ "$dns_name" =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]] ||
    die "DNS_NAME must be a host name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got '$dns_name'"
  [[ "$mount_name" =~ $LUSTRE_MOUNT_NAME_PATTERN ]] ||
    die "MOUNT_NAME must be the file system's mount name, $LUSTRE_MOUNT_NAME_RULE (e.g. abcdef12); got '$mount_name'"
  [[ "$mount_point" =~ $MOUNT_POINT_PATTERN ]] ||
    die "MOUNT_POINT must be an absolute directory like /fsx; got '$mount_point'"

  if mountpoint -q "$ROOT$mount_point"; then
    log INFO "$mount_point is already mounted; nothing to do"
    return 0
  fi
  if lustre_client_installed; then
    log INFO "Lustre client present"
  else
    install_lustre_client
  fi

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
