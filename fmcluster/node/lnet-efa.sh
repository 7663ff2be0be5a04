#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# lnet-efa.sh: Lustre's LNet over EFA on this node, for an EFA-enabled FSx for Lustre file system, where this node can
# be an FSx EFA client; mount-lustre.sh --efa runs it before it mounts.
#
# Usage: lnet-efa.sh           set LNet up and install fmcluster-lnet-efa.service (which runs `lnet-efa.sh --boot`)
#        lnet-efa.sh --boot    set LNet up again (at every boot, before remote file systems mount)
#
# Installs fmcluster-lustre-efa-check.timer first (lustre-efa-check.sh: after the mount, proof that the traffic rides
# EFA, as a metric). Exit status 0: LNet has EFA NIDs; 3: this node mounts over TCP (which an EFA-enabled file system
# serves too), the log says why: not an FSx EFA client (efa_client_problem), no EFA devices, or a set-up command failed. It ships in
# the node bundle (and the HyperPod lifecycle), not in the user data, which has no room for it.
# Log: /var/log/fmcluster/lnet-efa.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LNET_UNIT=fmcluster-lnet-efa.service
EFA_PEER_CREDITS=32 # what the FSx guide's lnetctl commands use
MIN_EFA_DRIVER=2.12.1 # FSx guide, "Configuring EFA clients"

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
  local boot="$1" instance_type interface shown count stride i problem
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
  if [[ "$boot" == 0 ]]; then
    install_boot_unit "$LNET_UNIT" \
      "fmcluster: Lustre LNet over EFA (the FSx for Lustre EFA client set-up) before Lustre mounts" \
      "$SCRIPT_DIR/lnet-efa.sh --boot" remote-fs.target \
      Wants=network-online.target After=network-online.target Before=remote-fs-pre.target
  fi
}

main() {
  local boot=0
  case "${1:-}" in
    --boot) boot=1 ;;
    "") ;;
    *)
      printf 'usage: %s [--boot]\n' "$0" >&2
      exit 2
      ;;
  esac
  require_root
  # the file system is EFA-enabled (mount-lustre.sh --efa runs this): prove, after the mount, that its traffic rides EFA
  if ((boot == 0)) && ! "$SCRIPT_DIR/lustre-efa-check.sh" --install; then
    log WARN "fmcluster-lustre-efa-check.timer could not be installed: nothing will say whether Lustre rides EFA"
  fi
  if configure_lnet_efa "$boot"; then
    return 0
  fi
  exit 3
}

main "$@"
