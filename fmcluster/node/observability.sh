#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# observability.sh: metrics on a node: node_exporter, NVIDIA dcgm-exporter (GPU nodes), the Slurm exporter (head node)
# and a Prometheus agent that remote-writes to Amazon Managed Service for Prometheus; Grafana on the head node.
#
# Usage: observability.sh --cluster NAME --region REGION
#                         (--prometheus-endpoint URL | --endpoint-parameter SSM_NAME)
#                         [--head-node] [--grafana] [--mirror s3://BUCKET/PREFIX] [--config-dir DIR]
#        observability.sh --refresh          (fmcluster-observability-refresh.timer: re-read the endpoint parameter)
#        observability.sh --write-textfile   (fmcluster-node-textfile.timer: EFA and Lustre client metrics, every 15 s)
#
#   --prometheus-endpoint  the workspace's Prometheus endpoint, https://aps-workspaces.REGION.amazonaws.com/workspaces/
#                          ws-.../ (remote write goes to <endpoint>api/v1/remote_write, signed with SigV4)
#   --endpoint-parameter   an SSM parameter holding that endpoint (ClusterObservability writes one). When it does not
#                          exist yet (the observability stack deploys after the cluster's), everything is installed, the
#                          agent waits, and a timer re-reads the parameter every 5 minutes.
#   --head-node            also run the Slurm exporter (this node has sinfo/squeue: HyperPod controller, PCS login node;
#                          found on PATH, else under /opt/aws/pcs/scheduler/slurm-*/bin (PCS) or /opt/slurm/bin)
#   --grafana              also run Grafana (self-hosted) on 127.0.0.1:3000 with the workspace as data source (SigV4)
#                          and fmcluster's dashboards; reach it with an SSM port forward. Admin password in
#                          /etc/fmcluster/grafana/admin-password.
#   --mirror               the project's artifact mirror, s3://<bucket>/fmcluster-mirror; default: the
#                          FMCLUSTER_ARTIFACT_MIRROR that run-step.sh keeps in node.env. Every binary and image comes
#                          from there and from nowhere else (mirror.sh's mirror_get: over the VPC's S3 gateway endpoint,
#                          in every egress mode, each file checked against the SHA-256 pinned in fmcluster's artifact
#                          list, fmcluster/mirror/artifacts.json, which travels with this script). Keys:
#                          <component>/<version>/<release file>, e.g.
#                          node_exporter/1.10.2/node_exporter-1.10.2.linux-amd64.tar.gz; the dcgm-exporter image as
#                          `docker save` output dcgm-exporter/<tag>/dcgm-exporter-image.linux-<arch>.tar, and for nodes
#                          without docker the dcgm-exporter binary per CPU architecture,
#                          dcgm-exporter/<version>/dcgm-exporter-<version>.linux-<arch>.tar.gz (NVIDIA publishes
#                          neither file, so neither has a pin and a node refuses both: fmcluster/mirror/README.md).
#   --config-dir           fmcluster's dashboards directory (agent.yml, *.json); default: ../dashboards next to this
#                          script, as in the fmcluster package.
#
# Pinned versions: NODE_EXPORTER_VERSION, PROMETHEUS_VERSION, SLURM_EXPORTER_VERSION, GRAFANA_VERSION,
# DCGM_EXPORTER_TAG below (each with the release asset names it installs and where those names come from); the
# artifact list holds one entry per version and CPU architecture. Running the script again changes nothing that is
# already in place and restarts only services whose unit or configuration changed. The exporters and Grafana are
# optional: one that cannot be installed (an artifact whose digest is unconfirmed is refused) or started is logged as a
# warning and left out; only the Prometheus agent stops the script.
# Log: /var/log/fmcluster/observability.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/mirror.sh"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# node_exporter 1.10 is the first release whose infiniband collector reads EFA devices (procfs v0.16.1: a port
# without counters/ no longer fails the device); 1.10.2 pins procfs v0.19.0. Assets (promu tarball and checksum,
# .promu.yml at the tag): node_exporter-<version>.linux-<arch>.tar.gz and sha256sums.txt.
NODE_EXPORTER_VERSION=1.10.2
# the Prometheus release whose archives the artifact list pins (prometheus-<version>.linux-<arch>.tar.gz)
PROMETHEUS_VERSION=3.8.1
# rivosinc/prometheus-slurm-exporter publishes binaries from v1.6.4; .goreleaser.yaml at v1.7.0 names the archive
# {{ .ProjectName }}_{{ .Os }}_{{ .Arch }} (no version); the binary sits at the archive's top level.
SLURM_EXPORTER_VERSION=1.7.0
GRAFANA_VERSION=11.6.0
# The image tag the dcgm-exporter README at tag 4.3.1-4.4.0 runs (NVIDIA's registry, k8s/dcgm-exporter:<tag>). Nodes
# never pull it: docker loads the mirror's `docker save` of it and tags it with this local name.
DCGM_EXPORTER_TAG=4.3.1-4.4.0-ubuntu22.04
DCGM_EXPORTER_IMAGE="fmcluster/dcgm-exporter:$DCGM_EXPORTER_TAG"
DCGM_EXPORTER_VERSION="${DCGM_EXPORTER_TAG%-ubuntu*}"
# the DCGM library dcgm-exporter 4.x loads at start (go-dcgm's dlopen of libdcgm.so.4; NVIDIA's datacenter-gpu-manager-4)
DCGM_LIBRARY=libdcgm.so.4
# DCGM_EXP_XID_ERRORS_COUNT counts each XID a GPU reported within this window (dcgm-exporter's default, 5 minutes)
XID_COUNT_WINDOW_MS=300000
INSTALL_ROOT="$ROOT/opt/fmcluster/observability"
ETC="$ROOT/etc/fmcluster"
TARGETS_DIR="$ETC/prometheus/targets"
TEXTFILE_DIR="$ROOT/var/lib/fmcluster/node-exporter-textfile"
SETTINGS="$ETC/observability.env"
# dcgm-exporter's --hpc-job-mapping-dir: one file per GPU index holding the Slurm job ids running on it, written by
# the Slurm prolog/epilog; dcgm-exporter turns them into the `hpc_job` label. HyperPod's AMI writes its own
# (prolog.d/700_dcgm_job_map_register.sh into /run/slurm/dcgm-job-mapping; awsome-distributed-training,
# 5.sagemaker-hyperpod/Extensions/observability/README.md), which slurm-hooks.sh then leaves in charge; elsewhere
# fmcluster's slurm/gpu-job-map.sh writes /run/fmcluster/dcgm-job-mapping.
JOB_MAP_DIR=/run/fmcluster/dcgm-job-mapping
if [[ -f "$ROOT/opt/slurm/etc/prolog.d/700_dcgm_job_map_register.sh" ]]; then
  JOB_MAP_DIR=/run/slurm/dcgm-job-mapping
fi
EFA_VENDOR=0x1d0f
GRAFANA_USER=fmcluster-grafana

usage() {
  printf 'usage: %s --cluster NAME --region REGION (--prometheus-endpoint URL | --endpoint-parameter NAME)' "$0" >&2
  printf ' [--head-node] [--grafana] [--mirror s3://BUCKET/PREFIX] [--config-dir DIR]\n' >&2
  printf '       %s --refresh | --write-textfile\n' "$0" >&2
  exit 2
}

# -- downloads --------------------------------------------------------------------------------------------------

arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "unsupported CPU architecture $(uname -m)" ;;
  esac
}

# install_release COMPONENT VERSION ARCHIVE STRIP: unpack the mirror's COMPONENT/VERSION/ARCHIVE (mirror_get: its
# pinned SHA-256 checked) into $INSTALL_ROOT/COMPONENT-VERSION (nothing to do when it is there already); prints that
# directory. Callers run it in a command substitution, which does not inherit set -e: the steps that can fail are
# checked here.
install_release() {
  local component="$1" version="$2" archive="$3" strip="$4" dest tmp
  dest="$INSTALL_ROOT/$component-$version"
  if [[ -f "$dest/.fmcluster-installed" ]]; then
    printf '%s\n' "$dest"
    return 0
  fi
  log INFO "installing $component $version from the mirror"
  mkdir -p "$INSTALL_ROOT"
  tmp="$(mktemp -d "$INSTALL_ROOT/.download.XXXXXX")" || die "cannot make a download directory in $INSTALL_ROOT"
  if ! mirror_get "$component/$version/$archive" "$tmp/$archive"; then
    rm -rf "$tmp"
    die "not installing $component $version: $component/$version/$archive is not in the mirror with its pinned SHA-256"
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  if ! tar -xzf "$tmp/$archive" -C "$dest" --strip-components="$strip" --no-same-owner; then
    rm -rf "$tmp" "$dest"
    die "not installing $component $version: $archive does not unpack"
  fi
  rm -rf "$tmp"
  : >"$dest/.fmcluster-installed"
  printf '%s\n' "$dest"
}

# -- services ---------------------------------------------------------------------------------------------------

# run_unit NAME CONFIG_CHANGED: start NAME; restart it when its unit (FMC_CHANGED) or its configuration changed.
run_unit() {
  local name="$1" config_changed="$2"
  if ((FMC_CHANGED || config_changed)); then
    systemctl restart "$name"
    log INFO "started $name"
  else
    systemctl start "$name"
  fi
}

# write_targets JOB PORT: the file_sd target file of JOB (this node's exporter on PORT); PORT empty: no target.
write_targets() {
  local job="$1" port="$2" node
  node="$(hostname -s)"
  if [[ -n "$port" ]]; then
    write_file "$TARGETS_DIR/$job.json" 0644 <<EOF
[{"targets": ["127.0.0.1:$port"], "labels": {"instance": "$node"}}]
EOF
  else
    write_file "$TARGETS_DIR/$job.json" 0644 <<<'[]'
  fi
}

# skip_exporter JOB WHY: leave JOB out of the agent's targets and say why (an optional exporter never stops the agent).
skip_exporter() {
  log WARN "$2"
  write_targets "$1" ""
}

setup_node_exporter() {
  local dir
  if ! dir="$(install_release node_exporter "$NODE_EXPORTER_VERSION" \
    "node_exporter-$NODE_EXPORTER_VERSION.linux-$ARCH.tar.gz" 1)"; then
    skip_exporter node "node_exporter is not run: its release could not be installed (see above)"
    return 0
  fi
  mkdir -p "$TEXTFILE_DIR"
  install_unit fmcluster-node-exporter.service <<EOF
[Unit]
Description=fmcluster: Prometheus node_exporter (EFA port state, network, /fsx, textfile metrics)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=${dir#"$ROOT"}/node_exporter --web.listen-address=:9100 --collector.infiniband --collector.ethtool \\
  --collector.ethtool.metrics-include=^(bw_in|bw_out|pps|conntrack|linklocal)_allowance_exceeded\$\$ \\
  --collector.textfile.directory=${TEXTFILE_DIR#"$ROOT"}
Restart=always
RestartSec=5
DynamicUser=yes
ProtectSystem=strict
ProtectHome=yes

[Install]
WantedBy=multi-user.target
EOF
  run_unit fmcluster-node-exporter.service 0
  install_timed_service fmcluster-node-textfile \
    "fmcluster: EFA hardware counters and Lustre client statistics for node_exporter" \
    "$SCRIPT_DIR/observability.sh --write-textfile" "" \
    "fmcluster: refresh EFA and Lustre client metrics every 15 seconds" OnBootSec=10s OnUnitActiveSec=15s AccuracySec=1s
  write_targets node 9100
}

has_gpus() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}

# load_dcgm_image: the pinned dcgm-exporter image into docker, from the mirror when docker does not hold it yet
# (`docker save` output for this CPU architecture, tagged DCGM_EXPORTER_IMAGE once loaded; never pulled).
load_dcgm_image() {
  local tmp loaded key="dcgm-exporter/$DCGM_EXPORTER_TAG/dcgm-exporter-image.linux-$ARCH.tar"
  if docker image inspect "$DCGM_EXPORTER_IMAGE" >/dev/null 2>&1; then
    return 0
  fi
  log INFO "loading $DCGM_EXPORTER_IMAGE from the mirror"
  tmp="$(mktemp -d "$ROOT/var/tmp/fmcluster-dcgm.XXXXXX")"
  if ! mirror_get "$key" "$tmp/dcgm-exporter.tar"; then
    rm -rf "$tmp"
    log ERROR "not loading $DCGM_EXPORTER_IMAGE: $key is not in the mirror with its pinned SHA-256"
    return 1
  fi
  # docker load prints "Loaded image: NAME:TAG" (or "Loaded image ID: sha256:..." for an untagged save)
  if ! loaded="$(docker load -i "$tmp/dcgm-exporter.tar")" || [[ ! "$loaded" =~ Loaded\ image(\ ID)?:\ ([^[:space:]]+) ]] ||
    ! docker tag "${BASH_REMATCH[2]}" "$DCGM_EXPORTER_IMAGE"; then
    rm -rf "$tmp"
    log ERROR "not loading $DCGM_EXPORTER_IMAGE: docker could not load and tag the mirror's $key"
    return 1
  fi
  rm -rf "$tmp"
}

# dcgm_command: how this node runs dcgm-exporter: in the pinned image when docker is there and holds it or the mirror
# has it, else a dcgm-exporter binary already on the node, else the mirror's binary for this CPU architecture (NVIDIA
# publishes no binary release), which needs DCGM's library on the node. Prints the ExecStart command; status 1 (the
# reason logged) when none of them.
dcgm_command() {
  local docker binary args dir
  args="-f /etc/fmcluster/dcgm-counters.csv -a :9400 --hpc-job-mapping-dir $JOB_MAP_DIR"
  args+=" --xid-count-window-size $XID_COUNT_WINDOW_MS"
  if docker="$(command -v docker)" && load_dcgm_image; then
    printf '%s \\\n  %s \\\n  %s \\\n  %s\n' \
      "$docker run --rm --name fmcluster-dcgm-exporter --gpus all --cap-add SYS_ADMIN --network host" \
      "-v /etc/fmcluster/dcgm-counters.csv:/etc/fmcluster/dcgm-counters.csv:ro" \
      "-v $JOB_MAP_DIR:$JOB_MAP_DIR:ro $DCGM_EXPORTER_IMAGE" "$args"
  elif binary="$(command -v dcgm-exporter)"; then
    printf '%s %s\n' "$binary" "$args"
  elif ! ldconfig -p 2>/dev/null | grep -q "$DCGM_LIBRARY"; then
    log WARN "the mirror's dcgm-exporter needs NVIDIA DCGM ($DCGM_LIBRARY), which this image lacks"
    return 1
  elif dir="$(install_release dcgm-exporter "$DCGM_EXPORTER_VERSION" \
    "dcgm-exporter-$DCGM_EXPORTER_VERSION.linux-$ARCH.tar.gz" 0)"; then
    printf '%s %s\n' "$dir/dcgm-exporter" "$args"
  else
    return 1
  fi
}

setup_dcgm_exporter() {
  local command counters_changed stop=""
  if ! has_gpus; then
    write_targets dcgm ""
    return 0
  fi
  mkdir -p "$ROOT$JOB_MAP_DIR"
  # DCGM fields to export: dcgm-exporter's defaults that the dashboards and alerts read, plus the profiling (DCP)
  # fields for tensor-core activity and NVLink throughput. XID alerts read DCGM_EXP_XID_ERRORS_COUNT (how often each
  # XID was reported within the window, label `xid`); DCGM_FI_DEV_XID_ERRORS is only the last XID, kept until the
  # exporter restarts, so a repeat cannot be seen in it. Exactly three fields per line and no comma in a help text:
  # dcgm-exporter reads the file with Go's encoding/csv, and a line with more fields makes it exit at start.
  write_file "$ETC/dcgm-counters.csv" 0644 <<'EOF'
# DCGM FIELD, Prometheus metric type, help message (written by fmcluster observability.sh)
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window (see xid-count-window-size param).
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed
DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_NVLINK_TX_BYTES, gauge, The rate of data transmitted over NVLink - not including protocol headers - in bytes per second.
DCGM_FI_PROF_NVLINK_RX_BYTES, gauge, The rate of data received over NVLink - not including protocol headers - in bytes per second.
DCGM_FI_DRIVER_VERSION, label, Driver Version
EOF
  counters_changed=$FMC_CHANGED
  if ! command="$(dcgm_command)"; then
    skip_exporter dcgm "GPUs, but dcgm-exporter is not run: no docker with $DCGM_EXPORTER_IMAGE (not there, or it could not be loaded) and no dcgm-exporter binary (on the node or from the mirror); GPU metrics are missing (alert GpuNodeWithoutDcgm)"
    return 0
  fi
  if [[ "$command" == *" run --rm --name fmcluster-dcgm-exporter "* ]]; then
    # systemd stops the docker client; the container is stopped (and a leftover one removed) by name
    stop="ExecStartPre=-${command%% *} rm -f fmcluster-dcgm-exporter
ExecStop=${command%% *} stop fmcluster-dcgm-exporter"
  fi
  install_unit fmcluster-dcgm-exporter.service <<EOF
[Unit]
Description=fmcluster: NVIDIA dcgm-exporter (GPU metrics, hpc_job label from $JOB_MAP_DIR)
After=docker.service network-online.target

[Service]
ExecStartPre=/bin/mkdir -p $JOB_MAP_DIR
ExecStart=$command
$stop
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
  run_unit fmcluster-dcgm-exporter.service "$counters_changed"
  write_targets dcgm 9400
}

# slurm_bin: the directory holding sinfo: PATH first (HyperPod), then PCS's install location
# /opt/aws/pcs/scheduler/slurm-<version>/bin (the newest; PCS puts it on PATH for login shells only), then /opt/slurm/bin.
slurm_bin() {
  local sinfo candidate
  if sinfo="$(command -v sinfo)"; then
    dirname "$sinfo"
    return 0
  fi
  for candidate in $(printf '%s\n' "$ROOT"/opt/aws/pcs/scheduler/slurm-*/bin | sort -rV) "$ROOT/opt/slurm/bin"; do
    if [[ -x "$candidate/sinfo" ]]; then
      printf '%s\n' "${candidate#"$ROOT"}"
      return 0
    fi
  done
  return 1
}

setup_slurm_exporter() {
  local dir bin
  if ((!HEAD_NODE)); then
    write_targets slurm ""
    return 0
  fi
  if ! bin="$(slurm_bin)"; then
    skip_exporter slurm "--head-node but no sinfo on PATH, in /opt/aws/pcs/scheduler/slurm-*/bin or in /opt/slurm/bin: the Slurm exporter is not run"
    return 0
  fi
  if ! dir="$(install_release slurm_exporter "$SLURM_EXPORTER_VERSION" \
    "prometheus-slurm-exporter_linux_$ARCH.tar.gz" 0)"; then
    skip_exporter slurm "the Slurm exporter is not run: its release could not be installed (see above)"
    return 0
  fi
  install_unit fmcluster-slurm-exporter.service <<EOF
[Unit]
Description=fmcluster: Slurm exporter (rivosinc/prometheus-slurm-exporter, sinfo/squeue CLI fallback)
After=network-online.target

[Service]
Environment=PATH=$bin:/usr/local/bin:/usr/bin:/bin
ExecStart=${dir#"$ROOT"}/prometheus-slurm-exporter -web.listen-address=:9092 -slurm.cli-fallback
Restart=always
RestartSec=15
DynamicUser=yes

[Install]
WantedBy=multi-user.target
EOF
  run_unit fmcluster-slurm-exporter.service 0
  write_targets slurm 9092
}

# prometheus_endpoint: the workspace's Prometheus endpoint, from --prometheus-endpoint or the SSM parameter;
# nothing (status 0) when the parameter does not exist yet.
prometheus_endpoint() {
  local value
  if [[ -n "$ENDPOINT" ]]; then
    printf '%s\n' "$ENDPOINT"
    return 0
  fi
  if value="$(retry aws ssm get-parameter --region "$REGION" --name "$ENDPOINT_PARAMETER" \
    --query Parameter.Value --output text)"; then
    printf '%s\n' "$value"
  else
    log WARN "SSM parameter $ENDPOINT_PARAMETER not readable yet; the Prometheus agent waits for it"
  fi
}

check_endpoint() {
  if [[ ! "$1" =~ ^https://[A-Za-z0-9.-]+/workspaces/ws-[A-Za-z0-9-]+/?$ ]]; then
    die "the Prometheus endpoint must look like https://aps-workspaces.$REGION.amazonaws.com/workspaces/ws-.../; got '$1'"
  fi
}

# configure_agent: render agent.yml for the workspace and (re)start the agent when it changed.
configure_agent() {
  local endpoint template config url
  endpoint="$(prometheus_endpoint)"
  if [[ -z "$endpoint" ]]; then
    return 0
  fi
  check_endpoint "$endpoint"
  url="${endpoint%/}/api/v1/remote_write"
  template="$(<"$CONFIG_DIR/agent.yml")"
  config="${template//@CLUSTER@/$CLUSTER}"
  config="${config//@REMOTE_WRITE_URL@/$url}"
  config="${config//@REGION@/$REGION}"
  config="${config//@TARGETS_DIR@//etc/fmcluster/prometheus/targets}"
  write_file "$ETC/prometheus/agent.yml" 0644 <<<"$config"
  local config_changed=$FMC_CHANGED
  install_unit fmcluster-prometheus-agent.service <<EOF
[Unit]
Description=fmcluster: Prometheus agent (scrapes this node's exporters, remote-writes to $url)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=$PROMETHEUS_DIR/prometheus --agent --config.file=/etc/fmcluster/prometheus/agent.yml \\
  --storage.agent.path=/var/lib/fmcluster-prometheus-agent --web.listen-address=127.0.0.1:9090
ExecReload=/bin/kill -HUP \$MAINPID
Restart=always
RestartSec=5
DynamicUser=yes
StateDirectory=fmcluster-prometheus-agent

[Install]
WantedBy=multi-user.target
EOF
  run_unit fmcluster-prometheus-agent.service "$config_changed"
  log INFO "Prometheus agent remote-writes to $url"
  if [[ -n "$GRAFANA" ]]; then
    configure_grafana_datasource "$endpoint"
  fi
}

setup_agent() {
  PROMETHEUS_DIR="$(install_release prometheus "$PROMETHEUS_VERSION" \
    "prometheus-$PROMETHEUS_VERSION.linux-$ARCH.tar.gz" 1)"
  PROMETHEUS_DIR="${PROMETHEUS_DIR#"$ROOT"}"
  if [[ -n "$ENDPOINT_PARAMETER" ]]; then
    install_timed_service fmcluster-observability-refresh \
      "fmcluster: point the Prometheus agent (and Grafana) at the workspace named in SSM" \
      "$SCRIPT_DIR/observability.sh --refresh" "" \
      "fmcluster: re-read the Prometheus endpoint parameter every 5 minutes" OnBootSec=2min OnUnitActiveSec=5min
  fi
  configure_agent
}

# -- Grafana (head node) ----------------------------------------------------------------------------------------

configure_grafana_datasource() {
  local endpoint="$1"
  write_file "$ETC/grafana/provisioning/datasources/fmcluster.yaml" 0644 <<EOF
# Written by fmcluster observability.sh: the cluster's Amazon Managed Service for Prometheus workspace.
apiVersion: 1
datasources:
  - name: Amazon Managed Prometheus ($CLUSTER)
    uid: fmcluster-amp
    type: prometheus
    access: proxy
    isDefault: true
    url: ${endpoint%/}
    jsonData:
      httpMethod: POST
      sigV4Auth: true
      sigV4AuthType: default
      sigV4Region: $REGION
EOF
  if ((FMC_CHANGED)); then
    systemctl restart fmcluster-grafana.service
    log INFO "Grafana data source: ${endpoint%/}"
  fi
}

setup_grafana() {
  local dir dashboards_changed=0 file target
  if ! dir="$(install_release grafana "$GRAFANA_VERSION" "grafana-$GRAFANA_VERSION.linux-$ARCH.tar.gz" 1)"; then
    log WARN "Grafana is not run: its release could not be installed (see above); the agent still remote-writes"
    GRAFANA=""
    return 0
  fi
  if ! id "$GRAFANA_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /sbin/nologin "$GRAFANA_USER"
  fi
  if [[ ! -s "$ETC/grafana/admin-password" ]]; then
    mkdir -p "$ETC/grafana"
    (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=\n' >"$ETC/grafana/admin-password")
    chown "root:$GRAFANA_USER" "$ETC/grafana/admin-password"
    chmod 0640 "$ETC/grafana/admin-password"
    log INFO "Grafana admin password written to /etc/fmcluster/grafana/admin-password"
  fi
  for file in "$CONFIG_DIR"/*.json; do
    target="$ROOT/var/lib/fmcluster/grafana-dashboards/${file##*/}"
    write_file "$target" 0644 <"$file"
    dashboards_changed=$((dashboards_changed | FMC_CHANGED))
  done
  write_file "$ETC/grafana/provisioning/dashboards/fmcluster.yaml" 0644 <<'EOF'
apiVersion: 1
providers:
  - name: fmcluster
    folder: fmcluster
    type: file
    disableDeletion: true
    allowUiUpdates: false
    options:
      path: /var/lib/fmcluster/grafana-dashboards
EOF
  write_file "$ETC/grafana/grafana.ini" 0644 <<'EOF'
; Written by fmcluster observability.sh. Grafana listens on loopback only: reach it with
;   aws ssm start-session --target <head node> --document-name AWS-StartPortForwardingSession \
;     --parameters portNumber=3000,localPortNumber=3000
[server]
http_addr = 127.0.0.1
http_port = 3000
[paths]
data = /var/lib/fmcluster-grafana
logs = /var/log/fmcluster-grafana
provisioning = /etc/fmcluster/grafana/provisioning
[security]
admin_password = $__file{/etc/fmcluster/grafana/admin-password}
disable_gravatar = true
[auth]
sigv4_auth_enabled = true
[aws]
allowed_auth_providers = default
[analytics]
reporting_enabled = false
check_for_updates = false
check_for_plugin_updates = false
[users]
allow_sign_up = false
EOF
  local config_changed=$((FMC_CHANGED | dashboards_changed))
  install_unit fmcluster-grafana.service <<EOF
[Unit]
Description=fmcluster: Grafana (self-hosted) on 127.0.0.1:3000 with the cluster's dashboards
After=network-online.target

[Service]
User=$GRAFANA_USER
ExecStart=${dir#"$ROOT"}/bin/grafana server --homepath ${dir#"$ROOT"} --config /etc/fmcluster/grafana/grafana.ini
StateDirectory=fmcluster-grafana
LogsDirectory=fmcluster-grafana
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
  run_unit fmcluster-grafana.service "$config_changed"
}

# -- textfile metrics -------------------------------------------------------------------------------------------

# efa_metrics: every EFA device's port hardware counters (/sys/class/infiniband/<dev>/ports/<n>/hw_counters/<name>) as
# node_amazonefa_<name>{device,port}: the names of AWS's EFA node exporter (its "amazonefa" node_exporter collector),
# so dashboards built for either work with both. `lifespan` is a setting (ms), so a gauge; the rest are counters.
efa_metrics() {
  local dev port counter name value kind
  local -A lines=()
  for dev in "$ROOT"/sys/class/infiniband/*; do
    [[ -d "$dev" && "$(cat "$dev/device/vendor" 2>/dev/null || true)" == "$EFA_VENDOR" ]] || continue
    for port in "$dev"/ports/*; do
      for counter in "$port"/hw_counters/*; do
        name="$(basename "$counter")"
        [[ -f "$counter" && "$name" =~ ^[a-z][a-z0-9_]*$ ]] || continue
        value="$(<"$counter")"
        [[ "$value" =~ ^[0-9]+$ ]] || continue
        lines[$name]+="node_amazonefa_$name{device=\"$(basename "$dev")\",port=\"$(basename "$port")\"} $value"$'\n'
      done
    done
  done
  for name in $(printf '%s\n' "${!lines[@]}" | sort); do
    kind=counter
    if [[ "$name" == lifespan ]]; then
      kind=gauge
    fi
    printf '# HELP node_amazonefa_%s EFA hardware counter %s (hw_counters).\n' "$name" "$name"
    printf '# TYPE node_amazonefa_%s %s\n%s' "$name" "$kind" "${lines[$name]}"
  done
}

# lustre_metrics: `lctl get_param llite.*.stats` of every mounted Lustre file system as
# fmcluster_lustre_client_{read,write}_bytes_total{fsname} and fmcluster_lustre_client_operations_total{fsname,operation}.
lustre_metrics() {
  local stats fsname="" name count word _unit _min _max sum _rest reads="" writes="" ops=""
  command -v lctl >/dev/null 2>&1 || return 0
  stats="$(lctl get_param llite.*.stats 2>/dev/null)" || return 0
  while read -r name count word _unit _min _max sum _rest; do
    if [[ "$name" =~ ^llite\.(.+)-[0-9a-f]+\.stats=$ ]]; then
      fsname="${BASH_REMATCH[1]}"
      continue
    fi
    [[ -n "$fsname" && "$word" == samples && "$count" =~ ^[0-9]+$ ]] || continue
    case "$name" in
      read_bytes) reads+="fmcluster_lustre_client_read_bytes_total{fsname=\"$fsname\"} ${sum:-0}"$'\n' ;;
      write_bytes) writes+="fmcluster_lustre_client_write_bytes_total{fsname=\"$fsname\"} ${sum:-0}"$'\n' ;;
      opencount | openclosetime) ;; # distributions of open files, not operations
      *) ops+="fmcluster_lustre_client_operations_total{fsname=\"$fsname\",operation=\"$name\"} $count"$'\n' ;;
    esac
  done <<<"$stats"
  if [[ -n "$reads$writes$ops" ]]; then
    printf '# HELP fmcluster_lustre_client_read_bytes_total Bytes read through this Lustre client (llite stats).\n'
    printf '# TYPE fmcluster_lustre_client_read_bytes_total counter\n%s' "$reads"
    printf '# HELP fmcluster_lustre_client_write_bytes_total Bytes written through this Lustre client (llite stats).\n'
    printf '# TYPE fmcluster_lustre_client_write_bytes_total counter\n%s' "$writes"
    printf '# HELP fmcluster_lustre_client_operations_total Lustre client operations by type (llite stats).\n'
    printf '# TYPE fmcluster_lustre_client_operations_total counter\n%s' "$ops"
  fi
}

# gpu_metrics: how many NVIDIA GPUs the driver sees (one /proc/driver/nvidia/gpus/<PCI address> directory each; the
# driver's README, "Procfs"), so a GPU node without a dcgm-exporter target can be told from a CPU node from outside
# (alert GpuNodeWithoutDcgm). Nothing on a node without the driver.
gpu_metrics() {
  local -a gpus
  [[ -d "$ROOT/proc/driver/nvidia/gpus" ]] || return 0
  mapfile -t gpus < <(compgen -G "$ROOT/proc/driver/nvidia/gpus/*" || true)
  printf '# HELP fmcluster_gpus NVIDIA GPUs the driver sees on this node (/proc/driver/nvidia/gpus).\n'
  printf '# TYPE fmcluster_gpus gauge\nfmcluster_gpus %d\n' "${#gpus[@]}"
}

write_textfile() {
  local tmp
  mkdir -p "$TEXTFILE_DIR"
  # node_exporter reads only *.prom files: write elsewhere in the directory, then rename (atomic)
  tmp="$(mktemp "$TEXTFILE_DIR/.fmcluster.XXXXXX")"
  {
    efa_metrics
    lustre_metrics
    gpu_metrics
  } >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$TEXTFILE_DIR/fmcluster.prom"
}

# -- main -------------------------------------------------------------------------------------------------------

save_settings() {
  write_file "$SETTINGS" 0644 <<EOF
CLUSTER=$(printf '%q' "$CLUSTER")
REGION=$(printf '%q' "$REGION")
ENDPOINT_PARAMETER=$(printf '%q' "$ENDPOINT_PARAMETER")
CONFIG_DIR=$(printf '%q' "$CONFIG_DIR")
GRAFANA=$(printf '%q' "$GRAFANA")
PROMETHEUS_DIR=$(printf '%q' "$PROMETHEUS_DIR")
EOF
}

main() {
  local mode=install
  CLUSTER="" REGION="" ENDPOINT="" ENDPOINT_PARAMETER="" GRAFANA="" HEAD_NODE=0 PROMETHEUS_DIR=""
  CONFIG_DIR="$(cd "$SCRIPT_DIR/.." && pwd)/dashboards"
  while (($#)); do
    case "$1" in
      --cluster | --region | --prometheus-endpoint | --endpoint-parameter | --mirror | --config-dir)
        (($# >= 2)) || usage
        case "$1" in
          --cluster) CLUSTER="$2" ;;
          --region) REGION="$2" ;;
          --prometheus-endpoint) ENDPOINT="$2" ;;
          --endpoint-parameter) ENDPOINT_PARAMETER="$2" ;;
          --mirror) FMCLUSTER_ARTIFACT_MIRROR="${2%/}" ;;
          --config-dir) CONFIG_DIR="$2" ;;
        esac
        shift 2
        ;;
      --head-node) HEAD_NODE=1 && shift ;;
      --grafana) GRAFANA=1 && shift ;;
      --refresh) mode=refresh && shift ;;
      --write-textfile) mode=textfile && shift ;;
      *) usage ;;
    esac
  done
  case "$mode" in
    textfile)
      write_textfile
      return 0
      ;;
    refresh)
      [[ -f "$SETTINGS" ]] || die "no $SETTINGS: run observability.sh with its install arguments first"
      # shellcheck source=/dev/null
      source "$SETTINGS"
      require_root
      configure_agent
      return 0
      ;;
  esac
  [[ -n "$CLUSTER" && -n "$REGION" ]] || usage
  if [[ -n "$ENDPOINT" && -n "$ENDPOINT_PARAMETER" ]] || [[ -z "$ENDPOINT$ENDPOINT_PARAMETER" ]]; then
    die "give one of --prometheus-endpoint and --endpoint-parameter"
  fi
  if [[ -n "$ENDPOINT" ]]; then
    check_endpoint "$ENDPOINT"
  fi
  if [[ ! "${FMCLUSTER_ARTIFACT_MIRROR:-}" =~ $MIRROR_URI_PATTERN ]]; then
    die "--mirror (or FMCLUSTER_ARTIFACT_MIRROR) must be an S3 URI like s3://my-bucket/fmcluster-mirror;" \
      "got '${FMCLUSTER_ARTIFACT_MIRROR:-}'"
  fi
  export FMCLUSTER_ARTIFACT_MIRROR AWS_DEFAULT_REGION="$REGION"
  if [[ ! -f "$CONFIG_DIR/agent.yml" ]]; then
    die "no agent.yml in --config-dir $CONFIG_DIR (fmcluster's dashboards directory)"
  fi
  require_root
  ARCH="$(arch)"
  log INFO "observability setup starts (cluster $CLUSTER, head node: $HEAD_NODE, mirror: $FMCLUSTER_ARTIFACT_MIRROR)"
  mkdir -p "$TARGETS_DIR"
  setup_node_exporter
  setup_dcgm_exporter
  setup_slurm_exporter
  if [[ -n "$GRAFANA" ]]; then
    setup_grafana
  fi
  setup_agent
  save_settings
  log INFO "observability setup finished"
}

main "$@"
