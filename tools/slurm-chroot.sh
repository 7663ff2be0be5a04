#!/usr/bin/env bash
#
# slurm-chroot.sh: a Debian chroot with a real Slurm and munge, for the node tests (tests/node/real_slurm.py), so
# fmcluster's Slurm pieces run against the Slurm versions AWS runs (PCS: 24.11 .. 26.05), not only the host's 22.05.
#
# Usage: slurm-chroot.sh RELEASE DIR [PACKAGE...]
#
#   RELEASE  a Debian release: trixie (Slurm 24.11.5) or forky (testing; Slurm 26.05.5) (FACTS.md, "Machine")
#   DIR      where the chroot goes, outside any checkout (the Makefile uses /var/cache/fmcluster-test/slurm-RELEASE)
#   PACKAGE  more packages to install besides Slurm's (the Makefile's accounting chroots: slurmdbd; mariadb-server)
#
# `debootstrap --variant=minbase RELEASE` from deb.debian.org, then `apt-get install slurmctld slurmd slurm-client
# munge` inside with services kept from starting (policy-rc.d answers 101, "action forbidden"). Built in DIR.partial
# and renamed to DIR when complete, so a half-built chroot is never taken for a finished one; a DIR that exists is
# left alone (delete it to rebuild). Needs root. debootstrap and apt-get mount /proc and friends in the chroot
# while they run; anything still mounted under DIR.partial is unmounted before the rename.
set -euo pipefail

MIRROR=http://deb.debian.org/debian
PACKAGES=(slurmctld slurmd slurm-client munge)

main() {
  local release="${1:-}" dir="${2:-}" partial script mounted
  if [[ -z "$release" || -z "$dir" ]]; then
    printf 'usage: %s RELEASE DIR [PACKAGE...]\n' "$0" >&2
    exit 2
  fi
  PACKAGES+=("${@:3}")
  if [[ -x "$dir/usr/sbin/slurmctld" ]]; then
    exit 0
  fi
  partial="$dir.partial"
  rm -rf "$partial"
  mkdir -p "$(dirname "$dir")"
  script="/usr/share/debootstrap/scripts/$release"
  if [[ ! -e "$script" ]]; then
    script=/usr/share/debootstrap/scripts/sid # a debootstrap older than the release: testing boots as sid does
  fi
  debootstrap --variant=minbase "$release" "$partial" "$MIRROR" "$script"
  printf '#!/bin/sh\nexit 101\n' >"$partial/usr/sbin/policy-rc.d"
  chmod 0755 "$partial/usr/sbin/policy-rc.d"
  mount -t proc proc "$partial/proc"
  trap 'umount "$partial/proc" 2>/dev/null || true' EXIT
  chroot "$partial" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"
  chroot "$partial" apt-get clean
  umount "$partial/proc"
  trap - EXIT
  while read -r _ mounted _; do
    if [[ "$mounted" == "$partial"/* ]]; then
      umount "$mounted"
    fi
  done < <(tac /proc/mounts)
  mv "$partial" "$dir"
}

main "$@"
