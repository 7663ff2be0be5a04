#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# mount-lustre.sh: mount an FSx for Lustre file system, over EFA when the file system is EFA-enabled.
#
# Usage: mount-lustre.sh DNS_NAME MOUNT_NAME [MOUNT_POINT] [--efa]
#        mount-lustre.sh --efa --lnet-only      (what fmcluster-lnet-efa.service runs at boot)
#
#   DNS_NAME     the file system's DNS name, e.g. fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com
#   MOUNT_NAME   its mount name (FileSystem.LustreConfiguration.MountName), e.g. abcdef12
#   MOUNT_POINT  where to mount it; default /fsx
#   --efa        the file system is EFA-enabled: set up this client's LNet for EFA first (see configure_lnet_efa),
#                where this node can be an FSx EFA client (efa_client_problem); otherwise, or when the set-up fails,
#                the file system is mounted over TCP (which an EFA-enabled file system serves too) with a warning
#
# Checks that the Lustre client module is installed for the running kernel and installs it when it is not
# (Amazon Linux 2023: dnf; Amazon Linux 2: amazon-linux-extras; Ubuntu and RHEL: the FSx client repository);
# writes one /etc/fstab line (`_netdev,noatime,flock`) and mounts with retries (the file system's DNS name can
# take a moment to resolve from a fresh node). Does nothing when MOUNT_POINT is already mounted. No /fsx is a failure.
# Client tunables in /etc/modprobe.d/fmcluster-lustre.conf, as AWS's configure-efa-fsx-lustre-client writes them for
# EFA clients and the FSx performance tips give for clients with 64 or more vCPUs: `options ksocklnd credits=2560`,
# `options ptlrpc ptlrpcd_per_cpt_max=32` (module options: they apply when the modules next load).
# Log: /var/log/fmcluster/mount-lustre.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LNET_UNIT=fmcluster-lnet-efa.service
EFA_PEER_CREDITS=32 # what the FSx guide's lnetctl commands use
TUNABLES=/etc/modprobe.d/fmcluster-lustre.conf
MIN_EFA_DRIVER=2.12.1 # FSx guide, "Configuring EFA clients"

usage() {
  printf 'usage: %s DNS_NAME MOUNT_NAME [MOUNT_POINT] [--efa]\n       %s --efa --lnet-only\n' "$0" "$0" >&2
  exit 2
}

os_release() { # os_release KEY: a value from /etc/os-release, unquoted
  local line
  if [[ -f "$ROOT/etc/os-release" ]]; then
    while IFS= read -r line; do
      if [[ "$line" == "$1="* ]]; then
        line="${line#*=}"
        line="${line#\"}"
        printf '%s\n' "${line%\"}"
        return 0
      fi
    done <"$ROOT/etc/os-release"
  fi
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

# efa_devices: the EFA devices (under /sys/class/infiniband, driver efa), one name per line, in natural order.
efa_devices() {
  local dev driver
  for dev in "$ROOT"/sys/class/infiniband/*; do
    if [[ -e "$dev/device/driver" ]]; then
      driver="$(basename "$(readlink -f "$dev/device/driver")")"
      if [[ "$driver" == efa ]]; then
        basename "$dev"
      fi
    fi
  done
}

# efa_interface_count INSTANCE_TYPE AVAILABLE: how many EFA devices LNet uses, from the FSx for Lustre user guide
# ("Configuring EFA clients", step 4): each one counts against the file system's 1024 EFA connections.
efa_interface_count() {
  local count
  case "$1" in
    p6-b300.*) count=16 ;;
    p6e-gb200.* | p6-b200.* | p5en.* | p5e.* | p5.*) count=8 ;;
    *) if (($2 > 1)); then count=2; else count=1; fi ;;
  esac
  if ((count > $2)); then
    count=$2
  fi
  printf '%s\n' "$count"
}

# primary_interface: the ENA interface that carries the default route (card 0 / device 0).
primary_interface() {
  local route i
  local -a words
  route="$(ip -4 route show default)"
  read -r -a words <<<"$route"
  for ((i = 0; i < ${#words[@]} - 1; i++)); do
    if [[ "${words[i]}" == dev ]]; then
      printf '%s\n' "${words[i + 1]}"
      return 0
    fi
  done
  die "no default IPv4 route; cannot tell the primary network interface"
}

# version_at_least HAVE NEED: whether version HAVE >= NEED (sort -V).
version_at_least() {
  local -a sorted
  mapfile -t sorted < <(printf '%s\n%s\n' "$1" "$2" | sort -V)
  [[ -n "$1" && "${sorted[0]}" == "$2" ]]
}

# efa_client_problem: why this node cannot be an FSx EFA client (FSx guide, "Configuring EFA clients": AL2023, RHEL
# 9.5+, Ubuntu 22.04+ with kernel 6.8+; the kefalnd module; EFA driver 2.12.1+), or nothing when it can.
efa_client_problem() {
  local id version kernel driver
  id="$(os_release ID)"
  version="$(os_release VERSION_ID)"
  kernel="$(uname -r)"
  case "$id" in
    amzn)
      if [[ "$version" != 2023 ]]; then
        printf 'Amazon Linux %s is no FSx EFA client OS\n' "$version"
        return
      fi
      ;;
    rhel | rocky | almalinux)
      if ! version_at_least "$version" 9.5; then
        printf '%s %s is older than 9.5\n' "$id" "$version"
        return
      fi
      ;;
    ubuntu)
      if ! version_at_least "$version" 22.04 || ! version_at_least "${kernel%%-*}" 6.8; then
        printf 'Ubuntu %s with kernel %s: FSx EFA clients need 22.04+ with kernel 6.8+\n' "$version" "$kernel"
        return
      fi
      ;;
    *)
      printf '%s is no FSx EFA client OS\n' "${id:-this OS}"
      return
      ;;
  esac
  if ! modinfo kefalnd >/dev/null 2>&1; then
    printf 'the Lustre client has no kefalnd module (LNet over EFA)\n'
    return
  fi
  driver="$(modinfo -F version efa 2>/dev/null || true)"
  if ! version_at_least "${driver%%[!0-9.]*}" "$MIN_EFA_DRIVER"; then
    printf 'EFA driver %s is older than %s\n' "${driver:-(none)}" "$MIN_EFA_DRIVER"
  fi
}

# write_tunables: AWS's client tunables as module options.
write_tunables() {
  write_file "$ROOT$TUNABLES" 0644 <<'EOF'
# Written by fmcluster mount-lustre.sh: AWS's FSx for Lustre client tunables (configure-efa-fsx-lustre-client).
options ksocklnd credits=2560
options ptlrpc ptlrpcd_per_cpt_max=32
EOF
  if ((FMC_CHANGED)); then
    log INFO "wrote ${TUNABLES}: ksocklnd credits=2560, ptlrpc ptlrpcd_per_cpt_max=32"
  fi
}

# lnet_efa INTERFACE DEVICE...: LNet with tcp on INTERFACE and efa on each DEVICE; fails at the first command that
# fails (the caller then mounts over TCP).
lnet_efa() {
  local interface="$1" dev
  shift
  modprobe lnet && modprobe kefalnd "ipif_name=$interface" && modprobe ksocklnd && lnetctl lnet configure || return 1
  lnetctl net del --net tcp >/dev/null 2>&1 || true # absent on a fresh LNet
  lnetctl net add --net tcp --if "$interface" || return 1
  for dev in "$@"; do
    lnetctl net add --net efa --if "$dev" --peer-credits "$EFA_PEER_CREDITS" || return 1
  done
  lnetctl set discovery 1 && lnetctl udsp add --src efa --priority 0
}

# configure_lnet_efa: the FSx for Lustre EFA client set-up ("Configuring EFA clients", step 3; the guide's
# configure-efa-fsx-lustre-client setup.sh does the same). It
#   1. loads LNet, the EFA LNet driver (kefalnd, told which interface is the primary ENA one) and the socket driver;
#   2. starts LNet and re-creates its tcp network on the primary interface only (the mount still names the file
#      system's @tcp NID, and the MGS is reached over TCP);
#   3. adds an `efa` LNet network on as many EFA devices as the guide's table gives for the instance type (16 on
#      p6-b300; 8 on p5, p5e, p5en, p6-b200, p6e-gb200; 2 on other multi-card types; 1 otherwise), spread evenly
#      over the devices (one per PCIe switch on p5: every fourth), with peer credits 32;
#   4. turns on LNet peer discovery and adds a UDSP rule giving efa NIDs priority, so bulk I/O to the file servers
#      goes over EFA once discovery has found their EFA NIDs;
#   5. loads the lustre module, and installs fmcluster-lnet-efa.service, which repeats 1-4 at every boot before
#      remote file systems are mounted (LNet settings made with lnetctl do not survive a reboot).
# Instances without EFA devices and trn2 (which FSx does not support as an EFA client) keep plain TCP, which an
# EFA-enabled file system also serves.
configure_lnet_efa() {
  local lnet_only="$1" instance_type interface shown count stride i problem
  local -a devices selected=()
  instance_type="${FMCLUSTER_INSTANCE_TYPE:-$(imds meta-data/instance-type)}"
  if [[ "$instance_type" == trn2.* ]]; then
    log WARN "$instance_type cannot be an FSx EFA client; using TCP"
    return 1
  fi
  problem="$(efa_client_problem)"
  if [[ -n "$problem" ]]; then
    log WARN "LNet over EFA is not possible here: $problem; using TCP"
    return 1
  fi
  mapfile -t devices < <(efa_devices | sort -V)
  if ((${#devices[@]} == 0)); then
    log WARN "no EFA devices on this $instance_type; using TCP"
    return 1
  fi
  write_tunables
  shown="$(lnetctl net show --net efa 2>/dev/null || true)"
  if [[ "$shown" == *@efa* ]]; then
    log INFO "LNet already has EFA NIDs; leaving it as it is"
  else
    count="$(efa_interface_count "$instance_type" "${#devices[@]}")"
    stride=$((${#devices[@]} / count))
    for ((i = 0; i < count; i++)); do
      selected+=("${devices[i * stride]}")
    done
    interface="$(primary_interface)"
    log INFO "LNet over EFA on $instance_type: tcp on $interface; efa on ${selected[*]} (${#selected[@]} of ${#devices[@]})"
    if ! lnet_efa "$interface" "${selected[@]}"; then
      log WARN "LNet over EFA could not be set up (see the lines above); using TCP"
      lnetctl net del --net efa >/dev/null 2>&1 || true
      return 1
    fi
  fi
  modprobe lustre
  if [[ "$lnet_only" == 0 ]]; then
    install_unit "$LNET_UNIT" <<EOF
[Unit]
Description=fmcluster: Lustre LNet over EFA (the FSx for Lustre EFA client set-up) before Lustre mounts
Wants=network-online.target
After=network-online.target
Before=remote-fs-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$SCRIPT_DIR/mount-lustre.sh --efa --lnet-only

[Install]
WantedBy=remote-fs.target
EOF
  fi
}

main() {
  local efa=0 lnet_only=0 arg dns_name mount_name mount_point options device
  local -a positional=()
  for arg in "$@"; do
    case "$arg" in
      --efa) efa=1 ;;
      --lnet-only) lnet_only=1 ;;
      -*) usage ;;
      *) positional+=("$arg") ;;
    esac
  done
  require_root
  if ((lnet_only)); then
    ((efa)) || usage
    configure_lnet_efa 1 || true # TCP still mounts
    return 0
  fi
  if ((${#positional[@]} < 2 || ${#positional[@]} > 3)); then
    usage
  fi
  dns_name="${positional[0]}"
  mount_name="${positional[1]}"
  mount_point="${positional[2]:-/fsx}"
  [[ "$dns_name" =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]] ||
    die "DNS_NAME must be a host name like fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com; got '$dns_name'"
  [[ "$mount_name" =~ ^[A-Za-z0-9_]{1,16}$ ]] ||
    die "MOUNT_NAME must be the file system's mount name, 1-16 letters, digits or '_' (e.g. abcdef12); got '$mount_name'"
  [[ "$mount_point" =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
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
  if ((efa)) && configure_lnet_efa 0; then
    # the boot-time mount waits for (and needs) the LNet set-up
    options+=",x-systemd.requires=$LNET_UNIT"
  elif (($(nproc) >= 64)); then
    write_tunables
  fi
  set_fstab_entry "$mount_point" "$device $mount_point lustre $options 0 0"
  mkdir -p "$ROOT$mount_point"
  retry mount -t lustre -o noatime,flock "$device" "$ROOT$mount_point"
  log INFO "mounted $device at $mount_point"
}

main "$@"
