#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# package-updates.sh: no unattended package update restarts slurmd or replaces the NVIDIA driver under running jobs.
#
# Usage: package-updates.sh
#
# On Ubuntu and Debian (the PCS-Ready DLAMI is Ubuntu 24.04, HyperPod's AMI Ubuntu 22.04):
# 1. needrestart never restarts slurmd: /etc/needrestart/conf.d/90-fmcluster-slurmd.conf adds slurmd to needrestart's
#    override_rc table with 0 (never restart). On the Ubuntu PCS-Ready DLAMI, unattended security upgrades update
#    libraries slurmd links (glibc), needrestart then restarts slurmd in its automatic mode, and that kills every job
#    on the node (awsome-distributed-ai PR 1165). The line sets one key: assigning the whole table, as that PR first
#    did, replaces the 43 exclusions Ubuntu ships (^docker, ^getty@, ...) with one (PR 1236's review, measured on
#    needrestart 3.6-7ubuntu4.5). qr(^slurmd) also matches versioned units (slurmd-25.11).
# 2. unattended-upgrades is off: /etc/apt/apt.conf.d/99-fmcluster-no-unattended-upgrades sets
#    APT::Periodic::Unattended-Upgrade "0", read after Ubuntu's 20auto-upgrades (apt reads apt.conf.d in name order, a
#    later value wins), so apt-daily-upgrade no longer installs updates by itself: a kernel or NVIDIA driver update can
#    no longer land under a running job (AWS ParallelCluster 3 turns Ubuntu's unattended upgrades off by default,
#    aws-parallelcluster issue 3269). Updates come with a new node image instead: `orchestrator.image_refresh`, or a
#    rebuilt baked image (`orchestrator.node_image_version`).
# Elsewhere (Amazon Linux) there is neither by default (unconfirmed), and nothing is changed.
# A baked image holds both files already: its nodes skip this step (fmcluster.node_files: bake "image").
# Log: /var/log/fmcluster/package-updates.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

NEEDRESTART_CONF=/etc/needrestart/conf.d/90-fmcluster-slurmd.conf
APT_CONF=/etc/apt/apt.conf.d/99-fmcluster-no-unattended-upgrades

main() {
  if (($#)); then
    printf 'usage: %s\n' "$0" >&2
    exit 2
  fi
  require_root
  case "$(os_release ID)" in
    ubuntu | debian) ;;
    *)
      log INFO "not Ubuntu or Debian: no needrestart or unattended-upgrades to hold back; nothing changed"
      return 0
      ;;
  esac
  write_file "$ROOT$NEEDRESTART_CONF" 0644 <<'EOF_NR'
# Written by fmcluster package-updates.sh: restarting slurmd kills the jobs running under it (one key of the table,
# so Ubuntu's own exclusions stay).
$nrconf{override_rc}{qr(^slurmd)} = 0;
EOF_NR
  if ((FMC_CHANGED)); then
    log INFO "needrestart: slurmd is never restarted automatically ($NEEDRESTART_CONF)"
  fi
  write_file "$ROOT$APT_CONF" 0644 <<'EOF_APT'
// Written by fmcluster package-updates.sh: no unattended upgrade replaces the kernel, the NVIDIA driver or a library
// slurmd links under running jobs; updates come with a new node image.
APT::Periodic::Unattended-Upgrade "0";
EOF_APT
  if ((FMC_CHANGED)); then
    log INFO "unattended-upgrades: off ($APT_CONF)"
  fi
}

main "$@"
