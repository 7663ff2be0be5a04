#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# lustre-efa-check.sh: prove that this node's Lustre traffic rides EFA, for an EFA-enabled FSx for Lustre file system,
# and publish the answer as node_exporter textfile metrics (alert LustreNotOverEfa).
#
# Usage: lustre-efa-check.sh             check every mounted Lustre file system (waits for one to be mounted)
#        lustre-efa-check.sh --install   install fmcluster-lustre-efa-check.timer (lnet-efa.sh runs this whenever
#                                        mount-lustre.sh --efa runs it: the file system is EFA-enabled)
#
# Why: where EFA is configured for FSx for Lustre but cannot carry the data (security groups, another AZ, a client
# that cannot be an EFA client), Lustre falls back to TCP "with no errors" (awslabs/awsome-distributed-ai PR 989,
# LifecycleScripts/base-config/mount_fsx.sh `verify_efa_transport`). Only bulk I/O to the storage servers uses EFA;
# metadata and pings ride TCP by design. So, as that function does, it writes PROBE_MIB MiB with O_DIRECT (`dd
# oflag=direct`, which the page cache cannot absorb) to a file on the file system, reads it back with `iflag=direct`,
# and compares the LNet counters of the `efa` network before and after (`lnetctl net show -v --net efa`: one
# `send_count:`/`recv_count:` pair per local NI under `statistics:`, lnet/utils/lnetconfig/liblnetconfig.c; summed
# over every NI, as awsome-distributed-ai PR 1203 does, and matched as whole keys so that `resend_count` never
# counts). The transport is proven when
#   1. both the efa send and receive counters rose (mount_fsx.sh);
#   2. efa carried at least half the bulk RPCs of the probe: PROBE_MIB writes and PROBE_MIB reads of 1 MiB each, one
#      RPC per direct 1 MiB call (aws/aws-parallelcluster PR 7572, test_efa: "require efa to gain at least half the
#      expected bulk RPCs"). The counters count LNet messages, of which a bulk RPC makes at least one on the client
#      (unconfirmed how many more: the threshold is then lenient, never strict);
#   3. efa gained more than tcp did (the same PR: "and more than tcp gained").
# Metrics, in TEXTFILE_DIR/lustre-efa.prom (written atomically; node_exporter's textfile collector reads *.prom):
#   fmcluster_lustre_efa_transport_ok{mountpoint,reason}   1 proven, 0 not; reason: ok, no-efa-network (LNet has no
#                                                         efa NI: the node fell back to TCP when it was set up),
#                                                         no-efa-traffic, too-little-efa-traffic, more-tcp-than-efa,
#                                                         probe-failed (the write or read failed: nothing proven),
#                                                         not-mounted
#   fmcluster_lustre_efa_probe_messages{mountpoint,net}  LNet messages sent and received during the probe, per net
#   fmcluster_lustre_efa_check_timestamp_seconds          when the check last ran
# The timer runs it 2 minutes after it starts (at every boot, and once installed) and every 6 hours after that, so a
# fallback that starts later is seen too. It never fails the node: see docs/observability.md ("Lustre over EFA") for
# why. Exit status: 0 proven on every mount, 1 not (the log and the metric say why), 2 bad usage.
# Log: /var/log/fmcluster/lustre-efa-check.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
UNIT=fmcluster-lustre-efa-check
TEXTFILE_DIR="$ROOT/var/lib/fmcluster/node-exporter-textfile" # observability.sh's --collector.textfile.directory
PROBE_MIB=64                                                  # what mount_fsx.sh verify_efa_transport writes
MOUNT_WAIT_SECONDS="${FMCLUSTER_LUSTRE_WAIT_SECONDS:-600}"

# lnet_counts NET: "SEND RECV", LNet's send_count and recv_count summed over every local NI of network NET.
lnet_counts() {
  lnetctl net show -v --net "$1" 2>/dev/null |
    awk '$1 == "send_count:" { send += $2 } $1 == "recv_count:" { recv += $2 } END { print send + 0, recv + 0 }'
}

# lustre_mounts: the mount points of every mounted Lustre file system (/proc/mounts: device, point, type, ...).
lustre_mounts() {
  local _device point type _rest
  while read -r _device point type _rest; do
    if [[ "$type" == lustre ]]; then
      printf '%s\n' "$point"
    fi
  done <"$ROOT/proc/mounts"
}

# probe MOUNT_POINT: the direct write and read; fails when either fails.
probe() {
  local file status=0
  file="$ROOT$1/.fmcluster-efa-check-${HOSTNAME%%.*}"
  dd if=/dev/zero of="$file" bs=1M count="$PROBE_MIB" oflag=direct status=none &&
    dd if="$file" of=/dev/null bs=1M iflag=direct status=none || status=$?
  rm -f "$file"
  return "$status"
}

# check MOUNT_POINT: the metric lines of one mount point; returns 1 when the transport is not proven.
check() {
  local point="$1" reason=ok es0 er0 ts0 tr0 es1 er1 ts1 tr1 efa=0 tcp=0
  if [[ "$(lnetctl net show --net efa 2>/dev/null || true)" != *@efa* ]]; then
    reason=no-efa-network
  else
    read -r es0 er0 < <(lnet_counts efa)
    read -r ts0 tr0 < <(lnet_counts tcp)
    if ! probe "$point"; then
      reason=probe-failed
    else
      read -r es1 er1 < <(lnet_counts efa)
      read -r ts1 tr1 < <(lnet_counts tcp)
      efa=$((es1 - es0 + er1 - er0))
      tcp=$((ts1 - ts0 + tr1 - tr0))
      if ((es1 <= es0 || er1 <= er0)); then
        reason=no-efa-traffic
      elif ((efa < PROBE_MIB)); then # half of the probe's 2 x PROBE_MIB bulk RPCs
        reason=too-little-efa-traffic
      elif ((efa <= tcp)); then
        reason=more-tcp-than-efa
      fi
    fi
  fi
  printf 'fmcluster_lustre_efa_transport_ok{mountpoint="%s",reason="%s"} %d\n' "$point" "$reason" \
    "$([[ "$reason" == ok ]] && echo 1 || echo 0)"
  printf 'fmcluster_lustre_efa_probe_messages{mountpoint="%s",net="%s"} %d\n' "$point" efa "$efa" "$point" tcp "$tcp"
  if [[ "$reason" == ok ]]; then
    log INFO "$point: Lustre rides EFA (LNet messages during a ${PROBE_MIB} MiB direct write and read: efa $efa, tcp $tcp)"
    return 0
  fi
  log WARN "$point: Lustre traffic is not proven to ride EFA: $reason (LNet messages during a ${PROBE_MIB} MiB direct" \
    "write and read: efa $efa, tcp $tcp); check the FSx and node security groups (all traffic to and from themselves)," \
    "that the file system is in this node's AZ, and /var/log/fmcluster/lnet-efa.log"
  return 1
}

write_metrics() {
  local tmp
  mkdir -p "$TEXTFILE_DIR"
  tmp="$(mktemp "$TEXTFILE_DIR/.lustre-efa.XXXXXX")" # node_exporter reads only *.prom: rename when complete
  {
    printf '# HELP fmcluster_lustre_efa_transport_ok Whether a direct write and read moved the LNet efa counters.\n'
    printf '# TYPE fmcluster_lustre_efa_transport_ok gauge\n'
    grep '^fmcluster_lustre_efa_transport_ok' <<<"$1"
    printf '# HELP fmcluster_lustre_efa_probe_messages LNet messages sent and received during the probe, per net.\n'
    printf '# TYPE fmcluster_lustre_efa_probe_messages gauge\n'
    grep '^fmcluster_lustre_efa_probe_messages' <<<"$1" || true
    printf '# HELP fmcluster_lustre_efa_check_timestamp_seconds When the Lustre-over-EFA check last ran.\n'
    printf '# TYPE fmcluster_lustre_efa_check_timestamp_seconds gauge\n'
    printf 'fmcluster_lustre_efa_check_timestamp_seconds %s\n' "$(date +%s)"
  } >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$TEXTFILE_DIR/lustre-efa.prom"
}

install_timer() {
  install_timed_service "$UNIT" \
    "fmcluster: prove Lustre traffic rides EFA (a direct write and read against the LNet efa counters)" \
    "$SCRIPT_DIR/lustre-efa-check.sh" remote-fs.target \
    "fmcluster: check that Lustre rides EFA after boot and every 6 hours" OnActiveSec=2min OnUnitActiveSec=6h
}

main() {
  local waited=0 point found lines="" status=0
  local -a points
  case "${1:-}" in
    --install)
      require_root
      install_timer
      return 0
      ;;
    "") ;;
    *)
      printf 'usage: %s [--install]\n' "$0" >&2
      exit 2
      ;;
  esac
  require_root
  mapfile -t points < <(lustre_mounts)
  while ((${#points[@]} == 0 && waited < MOUNT_WAIT_SECONDS)); do
    sleep 10
    waited=$((waited + 10))
    mapfile -t points < <(lustre_mounts)
  done
  if ((${#points[@]} == 0)); then
    log WARN "no Lustre file system is mounted after ${MOUNT_WAIT_SECONDS}s; nothing to check"
    write_metrics 'fmcluster_lustre_efa_transport_ok{mountpoint="",reason="not-mounted"} 0'
    exit 1
  fi
  for point in "${points[@]}"; do
    if ! found="$(check "$point")"; then
      status=1
    fi
    lines+="$found"$'\n'
  done
  write_metrics "$lines"
  exit "$status"
}

main "$@"
