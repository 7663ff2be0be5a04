#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# fabric-check.sh: a short fabric self-check when a node joins the cluster; a node that fails it is drained in Slurm
# with the reason, instead of taking jobs that would run at its pace.
#
# Usage: fabric-check.sh [--hold] [--efa N] [--gpus N] [--nvlink-floor GBPS]
#   --efa N            the node must have N EFA devices (the launch template's EFA interfaces: fmcluster.fabric)
#   --gpus N           nvidia-smi must list N GPUs
#   --nvlink-floor G   a one-node all_reduce must reach G GB/s bus bandwidth (0 or omitted: it must only complete with
#                      no wrong results)
#   --hold             drain the node while the check runs and resume it after a pass (AWS PCS, whose nodeReady stage
#                      runs this after slurmd registered, so the node could otherwise take a job meanwhile); on
#                      HyperPod the lifecycle's own hold (slurm-hold.sh) covers it, and its `release` leaves a node
#                      this script drained as it is, since the reason is not the lifecycle's
#
# The checks, after AWS's GPU health check suite (awslabs/awsome-distributed-ai 4.validation_and_observability/
# 2.gpu-cluster-healthcheck at 2b0416e, checks 0, 2 and 5; it drains nodes in Slurm the same way):
#   1. EFA: the RDMA devices of /sys/class/infiniband bound to the efa driver (that suite's 2-efa-enumeration.sh counts
#      these, "PCI functions remain visible after driver unbind, and non-EFA RDMA devices may coexist"); fewer than
#      --efa fails. A short count is counted again 3 times, 5 s apart, as that script does for p5en's late EFA start.
#   2. GPUs: `nvidia-smi -L` lines `GPU <n>: <name> (UUID: ...)` (MIG devices are indented lines of their own and do
#      not count); another number than --gpus, or nvidia-smi failing, fails.
#   3. NVLink, where the image has nccl-tests and the first two passed: all_reduce_perf -b 256M -e 256M -g GPUS -c 1 in
#      one process (that suite's NVLink-only test, with NCCL_P2P_LEVEL=NVL NCCL_NET=Socket), the out-of-place bus
#      bandwidth compared with --nvlink-floor, and no wrong results. The binary is FMCLUSTER_NCCL_TESTS, else the
#      newest /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf (where the DLAMIs keep nccl-tests:
#      awsome-distributed-ai micro-benchmarks/nccl-tests/slurm/nccl-tests-ami.sbatch), else
#      /opt/nccl-tests/build/all_reduce_perf; an image with none skips this check and says so (nothing is downloaded).
#      A node with a job running, configuring or completing skips it too (the GPUs are not free).
# The node's Slurm name: its short host name where Slurm knows it (HyperPod names nodes so), else the node whose
# NodeHostName is that name or whose NodeAddr is one of this host's addresses (PCS's node names are unconfirmed).
# A drain changes only the node's state in slurmctld, never slurm.conf. A node drained for another reason (an admin,
# PCS's or HyperPod's own health checks) keeps that reason and is never resumed here; a drain of this check's own
# ("fmcluster fabric: ...", from an earlier boot) is checked again and resumed on a pass.
# Output: one line, "fabric: passed (...)" or "fabric: FAILED: <reasons>". Exit status 0 passed, 1 failed (and drained
# where Slurm knows the node), 2 bad usage. Log: /var/log/fmcluster/fabric-check.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HOLD_REASON="fmcluster fabric check running"
REASON_PREFIX="fmcluster fabric:"
EFA_RECOUNTS=3
EFA_RECOUNT_SECONDS=5
NCCL_TIMEOUT_SECONDS=300
NUMBER='^[0-9]+$'

usage() {
  printf 'usage: %s [--hold] [--efa N] [--gpus N] [--nvlink-floor GBPS]\n' "$0" >&2
  exit 2
}

# efa_count: the RDMA devices bound to the efa driver.
efa_count() {
  local dev count=0
  for dev in "$ROOT"/sys/class/infiniband/*; do
    if [[ -e "$dev/device/driver" && "$(basename "$(readlink -f "$dev/device/driver")")" == efa ]]; then
      count=$((count + 1))
    fi
  done
  printf '%s\n' "$count"
}

# gpu_count: the GPUs nvidia-smi lists; fails when it cannot run.
gpu_count() {
  local listed
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  listed="$(nvidia-smi -L 2>/dev/null)" || return 1
  grep -cE '^GPU [0-9]+: ' <<<"$listed" || true
}

# nccl_tests: the all_reduce_perf binary of this image, or nothing.
nccl_tests() {
  local found
  if [[ -n "${FMCLUSTER_NCCL_TESTS:-}" ]]; then
    printf '%s\n' "$FMCLUSTER_NCCL_TESTS"
    return 0
  fi
  found="$(compgen -G "$ROOT/usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf" | sort -V | tail -n 1 || true)"
  if [[ -z "$found" && -x "$ROOT/opt/nccl-tests/build/all_reduce_perf" ]]; then
    found="$ROOT/opt/nccl-tests/build/all_reduce_perf"
  fi
  printf '%s\n' "$found"
}

# all_reduce BINARY GPUS: "BUSBW WRONG" of the out-of-place 256 MiB row (WRONG: both #wrong columns added), or
# nothing when the run failed or printed no such row. The columns: size count type redop root time algbw busbw
# #wrong time algbw busbw #wrong (nccl-tests' one table layout; FACTS.md, nccl-tests).
all_reduce() {
  local binary="$1" gpus="$2" cuda lib output
  cuda="$(dirname "$(dirname "$(dirname "$binary")")")"
  lib="$cuda/lib:$cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:/opt/amazon/ofi-nccl/lib"
  # OMPI_ALLOW_RUN_AS_ROOT*: the DLAMI's nccl-tests are built with Open MPI, which refuses root without them
  output="$(NCCL_P2P_LEVEL=NVL NCCL_NET=Socket OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout "$NCCL_TIMEOUT_SECONDS" "$binary" -b 256M -e 256M -g "$gpus" -c 1 2>&1)" || {
    log WARN "all_reduce_perf failed: $(tail -n 3 <<<"$output" | tr '\n' ' ')"
    return 0
  }
  printf '%s\n' "$output" >>"$LOG_FILE"
  awk '$1 == 268435456 && $4 == "sum" { wrong = ($9 == "N/A" ? 0 : $9) + ($13 == "N/A" ? 0 : $13); print $8, wrong;
    exit }' <<<"$output"
}

# slurm_node SCONTROL: this host's Slurm node name, or nothing when Slurm does not know it (or cannot be reached).
slurm_node() {
  local scontrol="$1" short address line name
  short="$(hostname -s)"
  if "$scontrol" show node "$short" --oneliner 2>/dev/null | grep -q "^NodeName=$short "; then
    printf '%s\n' "$short"
    return 0
  fi
  while IFS= read -r line; do
    name="${line#NodeName=}"
    name="${name%% *}"
    if [[ " $line " == *" NodeHostName=$short "* ]]; then
      printf '%s\n' "$name"
      return 0
    fi
    for address in $(hostname -I 2>/dev/null || true); do
      if [[ " $line " == *" NodeAddr=$address "* ]]; then
        printf '%s\n' "$name"
        return 0
      fi
    done
  done < <("$scontrol" show node --oneliner 2>/dev/null || true)
}

# node_reason SCONTROL NODE: the node's drain reason ("" when it is not drained), without Slurm's [user@time] suffix.
# Only while State= holds DRAIN: Slurm 24.11 keeps showing the last Reason= after a resume (measured here).
node_reason() {
  local shown part
  shown="$("$1" show node "$2" --oneliner 2>/dev/null || true)"
  if [[ " $shown" =~ \ State=[A-Z_+]*DRAIN && "$shown" == *" Reason="* ]]; then
    part="${shown#* Reason=}"
    printf '%s\n' "${part% \[*}"
  fi
}

main() {
  local hold=0 efa=0 gpus=0 floor=0 bin node="" reason found binary measured busbw wrong bound="" i
  local -a failures=() passed=()
  while (($#)); do
    case "$1" in
      --hold) hold=1 ;;
      --efa | --gpus | --nvlink-floor)
        (($# >= 2)) && [[ "$2" =~ $NUMBER ]] || usage
        case "$1" in --efa) efa="$2" ;; --gpus) gpus="$2" ;; *) floor="$2" ;; esac
        shift
        ;;
      *) usage ;;
    esac
    shift
  done
  require_root
  bin="$ROOT$(slurm_prefix)/bin"
  if [[ -x "$bin/scontrol" ]]; then
    node="$(slurm_node "$bin/scontrol")"
  fi
  if [[ -z "$node" ]]; then
    log WARN "Slurm does not know this node (yet), or slurmctld is unreachable: a failed check cannot drain it"
  elif ((hold)); then
    reason="$(node_reason "$bin/scontrol" "$node")"
    # its own earlier failure (a node rebooted after failing, with the check on every boot) is checked again too
    if [[ -z "$reason" || "$reason" == "$REASON_PREFIX"* ]]; then
      "$bin/scontrol" update NodeName="$node" State=DRAIN Reason="$HOLD_REASON"
      log INFO "node $node drained while its fabric is checked${reason:+ (was: $reason)}"
    else
      log INFO "node $node is drained already (reason: '$reason'); it stays so"
    fi
  fi

  if ((efa > 0)); then
    found="$(efa_count)"
    for ((i = 1; i <= EFA_RECOUNTS && found < efa; i++)); do
      log INFO "$found of $efa EFA devices; counting again in ${EFA_RECOUNT_SECONDS}s ($i of $EFA_RECOUNTS)"
      sleep "$EFA_RECOUNT_SECONDS"
      found="$(efa_count)"
    done
    if ((found < efa)); then
      failures+=("$found of $efa EFA devices")
    else
      passed+=("$found EFA devices")
    fi
  fi
  if ((gpus > 0)); then
    if ! found="$(gpu_count)"; then
      failures+=("nvidia-smi failed (0 of $gpus GPUs)")
    elif ((found != gpus)); then
      failures+=("nvidia-smi lists $found of $gpus GPUs")
    else
      passed+=("$found GPUs")
    fi
  fi
  if ((gpus > 1 && ${#failures[@]} == 0)); then
    binary="$(nccl_tests)"
    if [[ -z "$binary" ]]; then
      log INFO "no nccl-tests on this image (FMCLUSTER_NCCL_TESTS, /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf," \
        "/opt/nccl-tests/build/all_reduce_perf): NVLink bandwidth not measured"
      passed+=("NVLink not measured: no nccl-tests on this image")
    elif [[ -n "$node" && -n "$("$bin/squeue" --noheader --nodelist="$node" --states=RUNNING,CONFIGURING,COMPLETING --format=%A 2>/dev/null || true)" ]]; then
      log INFO "node $node runs a job already (running, configuring or completing): NVLink bandwidth not measured"
      passed+=("NVLink not measured: a job runs")
    else
      measured="$(all_reduce "$binary" "$gpus")"
      read -r busbw wrong <<<"${measured:-- -}"
      if [[ "$busbw" == - ]]; then
        failures+=("the one-node all_reduce failed (${binary#"$ROOT"})")
      elif [[ "$wrong" != 0 ]]; then
        failures+=("the one-node all_reduce had $wrong wrong results")
      elif awk -v bw="$busbw" -v floor="$floor" 'BEGIN { exit !(bw < floor) }'; then
        failures+=("one-node all_reduce busbw $busbw GB/s below $floor")
      else
        ((floor == 0)) || bound=", floor $floor"
        passed+=("one-node all_reduce busbw $busbw GB/s$bound")
      fi
    fi
  fi

  if ((${#failures[@]})); then
    reason="$REASON_PREFIX $(printf '%s; ' "${failures[@]}")"
    reason="${reason%; }"
    if [[ -n "$node" ]]; then
      found="$(node_reason "$bin/scontrol" "$node")"
      if [[ -z "$found" || "$found" == "$HOLD_REASON" || "$found" == "fmcluster lifecycle running" ||
        "$found" == "$REASON_PREFIX"* ]]; then
        "$bin/scontrol" update NodeName="$node" State=DRAIN Reason="$reason"
        log ERROR "node $node drained: $reason"
      else
        log ERROR "node $node keeps its own drain reason '$found'; $reason"
      fi
    else
      log ERROR "$reason (not drained: Slurm does not know this node)"
    fi
    printf 'fabric: FAILED: %s\n' "${reason#"$REASON_PREFIX "}"
    return 1
  fi
  # given back: the hold's drain, or this check's own earlier failure (what failed passed now); never another's drain
  reason=""
  [[ -z "$node" ]] || reason="$(node_reason "$bin/scontrol" "$node")"
  if [[ "$reason" == "$REASON_PREFIX"* ]] || { ((hold)) && [[ "$reason" == "$HOLD_REASON" ]]; }; then
    "$bin/scontrol" update NodeName="$node" State=RESUME
    log INFO "node $node resumed: its fabric check passed"
  fi
  reason="$(printf '%s; ' "${passed[@]}")"
  printf 'fabric: passed (%s)\n' "${reason%; }"
}

main "$@"
