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

main() {
  local device found fstype uuid
  local -a disks
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

  install_unit fmcluster-scratch.service <<EOF
[Unit]
Description=fmcluster: local NVMe instance store at $MOUNT_POINT (rebuilt when a stop/start erased it)
After=local-fs.target
Before=slurmd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$SCRIPT_DIR/nvme-raid.sh

[Install]
WantedBy=multi-user.target
EOF
}

main "$@"
