#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# nvme-raid.sh: turn the instance's local NVMe instance-store disks into one XFS file system at /scratch.
#
# Usage: nvme-raid.sh
#
# Finds the disks whose model is "Amazon EC2 NVMe Instance Storage" (lsblk; `nvme list` when lsblk is missing;
# EBS volumes report "Amazon Elastic Block Store" and are never touched). Two or more disks are striped into a
# RAID 0 array, /dev/md/scratch (mdadm); a single disk is used as it is. The device gets an XFS file system
# labelled "scratch" (only when it has none), is mounted at /scratch with mode 1777 (like /tmp), and is recorded
# in /etc/fstab by file-system UUID with `nofail` and the array in mdadm.conf, so a reboot brings it back.
#
# A stop/start (unlike a reboot) hands the instance blank disks. The fmcluster-scratch.service unit this script
# installs runs it again at every boot: the stale fstab line is skipped (nofail, 5 s device timeout) and the
# array is rebuilt, and the fstab and mdadm.conf entries replaced.
#
# HyperPod's DLAMI-based image assembles the disks itself before any lifecycle script runs: its dlami-nvme service
# puts them into LVM (vg.01/lv_ephemeral) and mounts that at /opt/dlami/nvme (awsome-distributed-training
# base-config/utils/install_enroot_pyxis.sh; mdadm on those disks fails "device busy"). When /opt/dlami/nvme is
# mounted, or the disks are LVM physical volumes, this script leaves them alone: it waits for /opt/dlami/nvme (at most
# FMCLUSTER_DLAMI_WAIT seconds, default 120 as AWS's script) and bind-mounts its directory scratch/ (mode 1777) at
# /scratch, recorded in /etc/fstab (`bind,nofail`, after /opt/dlami/nvme). Disks in LVM but no /opt/dlami/nvme: it
# fails, naming the volume group, and touches nothing.
#
# Does nothing and exits 0 when /scratch is already mounted, or when the instance has no instance-store NVMe.
# Log: /var/log/fmcluster/nvme-raid.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INSTANCE_STORE_MODEL="Amazon EC2 NVMe Instance Storage"
MD_DEVICE=/dev/md/scratch
MOUNT_POINT=/scratch
LABEL=scratch
DLAMI_MOUNT=/opt/dlami/nvme

# instance_store_disks: the instance-store NVMe disks, one path per line, in natural order (nvme1n1 ... nvme10n1).
instance_store_disks() {
  local listing line name model
  if command -v lsblk >/dev/null 2>&1; then
    listing="$(lsblk --nodeps --noheadings --paths --pairs --output NAME,MODEL,TYPE)"
    while IFS= read -r line; do
      if [[ "$line" =~ ^NAME=\"([^\"]+)\"\ MODEL=\"([^\"]*)\"\ TYPE=\"disk\"$ ]]; then
        name="${BASH_REMATCH[1]}"
        model="${BASH_REMATCH[2]}"
        model="${model%"${model##*[! ]}"}" # lsblk pads the model with spaces
        if [[ "$model" == "$INSTANCE_STORE_MODEL" ]]; then
          printf '%s\n' "$name"
        fi
      fi
    done <<<"$listing"
  elif command -v nvme >/dev/null 2>&1; then
    listing="$(nvme list)"
    while IFS= read -r line; do
      if [[ "$line" == /dev/* && "$line" == *"$INSTANCE_STORE_MODEL"* ]]; then
        printf '%s\n' "${line%% *}"
      fi
    done <<<"$listing"
  else
    die "neither lsblk nor nvme is installed; cannot find the instance-store disks"
  fi
}

mdadm_conf() {
  if [[ -d "$ROOT/etc/mdadm" ]]; then
    printf '%s\n' "$ROOT/etc/mdadm/mdadm.conf" # Debian and Ubuntu
  else
    printf '%s\n' "$ROOT/etc/mdadm.conf" # Amazon Linux, RHEL
  fi
}

# record_array: make the array's ARRAY line the one for /dev/md/scratch in mdadm.conf, so it is assembled under
# the same name at boot; on Debian and Ubuntu the initramfs carries mdadm.conf, so it is rebuilt too.
record_array() {
  local conf detail line
  local -a kept=()
  conf="$(mdadm_conf)"
  detail="$(mdadm --detail --brief "$MD_DEVICE")"
  if [[ -f "$conf" ]]; then
    while IFS= read -r line || [[ -n "$line" ]]; do
      if [[ "$line" != "ARRAY $MD_DEVICE "* ]]; then
        kept+=("$line")
      fi
    done <"$conf"
  fi
  kept+=("$detail")
  write_file "$conf" 0644 < <(printf '%s\n' "${kept[@]}")
  if ((FMC_CHANGED)); then
    log INFO "recorded the array in $conf"
    if command -v update-initramfs >/dev/null 2>&1; then
      update-initramfs -u
    fi
  fi
}

# lvm_groups DISK...: the LVM volume groups any of DISK belongs to (pvs), one per line; nothing without LVM tools.
lvm_groups() {
  local pv vg disk
  command -v pvs >/dev/null 2>&1 || return 0
  while read -r pv vg; do
    for disk in "$@"; do
      [[ "$pv" == "$disk" && -n "$vg" ]] && printf '%s\n' "$vg"
    done
  done < <(pvs --noheadings -o pv_name,vg_name 2>/dev/null || true)
}

# use_dlami_volume: /scratch as a bind mount of /opt/dlami/nvme/scratch, once /opt/dlami/nvme is mounted.
use_dlami_volume() {
  local groups="$1" waited=0 limit="${FMCLUSTER_DLAMI_WAIT:-120}"
  until mountpoint -q "$ROOT$DLAMI_MOUNT"; do
    if ((waited >= limit)); then
      die "the instance-store disks are in LVM (volume group ${groups:-unknown}, HyperPod's dlami-nvme) but" \
        "$DLAMI_MOUNT is not mounted after ${limit}s; see 'systemctl status dlami-nvme'; the disks were not touched"
    fi
    sleep 5
    waited=$((waited + 5))
  done
  mkdir -p "$ROOT$DLAMI_MOUNT/scratch" "$ROOT$MOUNT_POINT"
  chmod 1777 "$ROOT$DLAMI_MOUNT/scratch"
  set_fstab_entry "$MOUNT_POINT" \
    "$DLAMI_MOUNT/scratch $MOUNT_POINT none bind,nofail,x-systemd.requires-mounts-for=$DLAMI_MOUNT 0 0"
  mount --bind "$ROOT$DLAMI_MOUNT/scratch" "$ROOT$MOUNT_POINT"
  log INFO "$MOUNT_POINT is $DLAMI_MOUNT/scratch, on the volume HyperPod's dlami-nvme assembled"
  boot_unit
}

# boot_unit: fmcluster-scratch.service, which runs this script at every boot, before the image's slurmd unit(s) and
# after dlami-nvme (where there is one): /scratch comes back after a reboot, and after a stop/start, which hands the
# instance blank disks (a fresh DLAMI volume has no scratch/ directory for fstab's bind line).
boot_unit() {
  local before
  local -a units
  mapfile -t units < <(slurmd_units)
  before="${units[*]:-slurmd.service}"
  install_boot_unit fmcluster-scratch.service \
    "fmcluster: local NVMe instance store at $MOUNT_POINT (rebuilt when a stop/start erased it)" \
    "$SCRIPT_DIR/nvme-raid.sh" multi-user.target "After=local-fs.target dlami-nvme.service" "Before=${before}"
}

main() {
  local device found fstype uuid groups
  local -a disks listed
  require_root
  if mountpoint -q "$ROOT$MOUNT_POINT"; then
    log INFO "$MOUNT_POINT is already mounted; nothing to do"
    return 0
  fi

  found="$(instance_store_disks)"
  mapfile -t disks < <(printf '%s' "$found" | sort -V)
  if ((${#disks[@]} == 0)); then
    log INFO "no NVMe instance-store disks on this instance; nothing to do"
    return 0
  fi
  log INFO "${#disks[@]} instance-store disk(s): ${disks[*]}"
  mapfile -t listed < <(lvm_groups "${disks[@]}" | sort -u)
  groups="${listed[*]}"
  if [[ -n "$groups" ]] || mountpoint -q "$ROOT$DLAMI_MOUNT"; then
    use_dlami_volume "$groups"
    return 0
  fi

  if ((${#disks[@]} == 1)); then
    device="${disks[0]}"
  else
    device="$MD_DEVICE"
    if mdadm --detail "$MD_DEVICE" >/dev/null 2>&1; then
      log INFO "$MD_DEVICE already exists; not creating it again"
    else
      log INFO "creating RAID 0 $MD_DEVICE from ${#disks[@]} disks"
      mdadm --create "$MD_DEVICE" --run --level=0 --name="$LABEL" --raid-devices="${#disks[@]}" "${disks[@]}"
      if command -v udevadm >/dev/null 2>&1; then
        udevadm settle
      fi
    fi
    record_array
  fi

  fstype="$(blkid -o value -s TYPE "$device" || true)"
  if [[ -z "$fstype" ]]; then
    log INFO "formatting $device as XFS"
    # -K: no discard pass; instance store arrives blank, and discarding tens of TB costs minutes of boot
    mkfs.xfs -f -K -L "$LABEL" "$device"
  elif [[ "$fstype" != xfs ]]; then
    die "$device holds a $fstype file system; refusing to format it (expected none or xfs)"
  fi
  uuid="$(blkid -o value -s UUID "$device")"
  if [[ -z "$uuid" ]]; then
    die "blkid reports no file-system UUID for $device"
  fi

  # nofail: a boot never waits on scratch; the device timeout keeps a stale UUID (after a stop/start) from
  # holding the boot for the default 90 s before fmcluster-scratch.service rebuilds the array.
  set_fstab_entry "$MOUNT_POINT" \
    "UUID=$uuid $MOUNT_POINT xfs defaults,noatime,nofail,x-systemd.device-timeout=5s 0 0"
  mkdir -p "$ROOT$MOUNT_POINT"
  mount -t xfs -o defaults,noatime "$device" "$ROOT$MOUNT_POINT"
  chmod 1777 "$ROOT$MOUNT_POINT"
  log INFO "mounted $device at $MOUNT_POINT"

  boot_unit
}

main "$@"
