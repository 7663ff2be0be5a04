#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# enroot-pyxis.sh: the enroot container runtime and the pyxis Slurm plugin, so `srun --container-image=...` runs
# training containers that see the EFA devices, with enroot's caches on local disk, not the root volume.
#
# Usage: enroot-pyxis.sh
#
# 1. Installs what the image lacks (neither HyperPod's image nor the AWS PCS sample AMIs are assumed to ship them;
#    AWS's own HyperPod lifecycle installs both, awsome-distributed-training base-config/utils/install_enroot_pyxis.sh):
#    enroot ENROOT_VERSION's release packages (the package names of enroot's doc/installation.md at that tag: .deb on
#    Ubuntu, .el8 .rpm on Amazon Linux) and pyxis PYXIS_VERSION's source archive, both from the project's in-account
#    mirror only (mirror.sh's mirror_get: FMCLUSTER_ARTIFACT_MIRROR over the S3 gateway endpoint, SHA-256 pinned in
#    the package; never an internet host, in any egress mode), pyxis built against this image's Slurm headers (the PCS user guide,
#    "Install SPANK plugins": /opt/aws/pcs/scheduler/slurm-<version>/include) and installed into that Slurm's plugin
#    directory. CPPFLAGS goes in the environment, as AWS's install_enroot_pyxis.sh does: pyxis's Makefile appends it to
#    its own flags, which a command-line CPPFLAGS would replace. enroot's package dependencies (jq, parallel,
#    squashfs-tools, fuse-overlayfs, squashfuse) come from the image's own package repositories (not mirrored: with
#    `egress: none` the image must carry them, unconfirmed for the PCS-Ready DLAMI); gcc and make, which build pyxis,
#    must be on the image (build_tools_present: nothing installs them). A failure stops here, naming what to do.
# 2. Writes /etc/enroot/enroot.conf with ENROOT_RESTRICT_DEV no (AWS's HyperPod enroot.conf: with `y` enroot's
#    10-devices hook replaces /dev and /dev/infiniband/uverbs*, the EFA devices, vanish from containers), the runtime
#    under /run/enroot and the caches under local disk: /scratch when mounted (nvme-raid.sh), else /opt/dlami/nvme
#    (HyperPod's DLAMI volume), else /opt/sagemaker (HyperPod's extra EBS volume), else /tmp (with a warning).
# 3. /run/enroot mode 1777 (every user's runtime directory goes under it) and /run/pyxis mode 0755, root's (pyxis's
#    slurmd part makes it so itself, mkdir(runtime_path, 0755) in pyxis_slurmd.c at v0.24.0: 1777 would let one user
#    pre-create another's runtime directory), and enroot's cache, data and temp directories on local disk (1777),
#    now and at every boot: /etc/tmpfiles.d/fmcluster-enroot.conf, applied by systemd at boot (/run is a tmpfs) and
#    again by fmcluster-enroot-dirs.service once fmcluster-scratch.service has rebuilt /scratch (a stop/start hands the
#    instance blank disks; without the directories every user but the first to run a container fails).
# 4. enroot's extra hooks 50-slurm-pmi.sh (PMI/PMIx variables and the PMIx directories of the job step, so MPI inside a
#    container talks to Slurm) and 50-slurm-pytorch.sh (MASTER_ADDR, RANK, ... from Slurm), which enroot installs under
#    <datadir>/enroot/hooks.d but not in /etc/enroot/hooks.d where it runs hooks (Makefile, HOOKS_EXTRA, v4.1.2), linked
#    there; AWS's PCS image recipe and ParallelCluster link both. 50-slurm-pmi.sh runs `scontrol`, so every slurmd
#    unit gets Slurm's bin directory on its PATH (a systemd drop-in, fmcluster-path.conf; slurmd is restarted when
#    it runs and the drop-in changed).
# 5. Adds pyxis to the Slurm plugin stack unless a plugin-stack file loads it already: plugstack.conf.d/pyxis.conf
#    in /opt/slurm/etc (HyperPod; plugstack.conf includes it) or /etc/aws/pcs/scheduler/slurm-<version> (PCS's
#    default SPANK directory, "Configure SPANK plugins"), else /etc/slurm. srun and slurmstepd read the plugin stack
#    at every job step, so no daemon is restarted.
# Log: /var/log/fmcluster/enroot-pyxis.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=mirror.sh
source "$HERE/mirror.sh"

ENROOT_VERSION=4.1.2
PYXIS_VERSION=0.24.0
ENROOT_CONF=/etc/enroot/enroot.conf
TMPFILES=/etc/tmpfiles.d/fmcluster-enroot.conf
DIRS_UNIT=fmcluster-enroot-dirs.service
ENROOT_HOOKS=/etc/enroot/hooks.d
# where enroot's packages put HOOKS_EXTRA: $(datadir)/enroot/hooks.d with prefix /usr (Makefile at v4.1.2)
ENROOT_EXTRA_HOOKS=/usr/share/enroot/hooks.d
EXTRA_HOOKS=(50-slurm-pmi.sh 50-slurm-pytorch.sh)
LOCAL_DISKS=(/scratch /opt/dlami/nvme /opt/sagemaker)
PYXIS_PLUGIN=spank_pyxis.so
ADVICE="see the mirror job's log (fmcluster/mirror/README.md: a digest not pinned is never mirrored), or use an image"
ADVICE+=" with enroot and pyxis installed"

# os_release KEY: KEY's value in /etc/os-release (ID, VERSION_ID), quotes removed.
os_release() {
  local line
  while IFS= read -r line; do
    [[ "$line" == "$1="* ]] && { line="${line#"$1"=}"; printf '%s\n' "${line//\"/}"; return 0; }
  done <"$ROOT/etc/os-release"
}

os_id() {
  os_release ID
}

install_enroot() {
  local arch work status=0
  work="$(mktemp -d)"
  case "$(os_id)" in
    ubuntu | debian)
      arch="$(dpkg --print-architecture)"
      mirror_get "enroot/$ENROOT_VERSION/enroot_${ENROOT_VERSION}-1_${arch}.deb" "$work/enroot.deb" &&
        mirror_get "enroot/$ENROOT_VERSION/enroot+caps_${ENROOT_VERSION}-1_${arch}.deb" "$work/enroot+caps.deb" &&
        retry env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=120 \
          squashfs-tools fuse-overlayfs squashfuse "$work/enroot.deb" "$work/enroot+caps.deb" || status=1
      ;;
    amzn | rhel | rocky | almalinux)
      arch="$(uname -m)"
      # enroot's rpm requires GNU parallel (pkg/rpm/SPECS/enroot.spec at v4.1.2), which Amazon Linux 2 has only in
      # EPEL (enroot issue 202: amazon-linux-extras install epel on amazonlinux:2). Amazon Linux 2023 supports no
      # EPEL; whether its own repository has parallel is unconfirmed, and yum then fails with the reason.
      if [[ "$(os_id)" == amzn && "$(os_release VERSION_ID)" == 2 ]]; then
        retry amazon-linux-extras install -y epel || status=1
      fi
      ((status == 0)) &&
        mirror_get "enroot/$ENROOT_VERSION/enroot-${ENROOT_VERSION}-1.el8.${arch}.rpm" "$work/enroot.rpm" &&
        mirror_get "enroot/$ENROOT_VERSION/enroot+caps-${ENROOT_VERSION}-1.el8.${arch}.rpm" "$work/enroot+caps.rpm" &&
        retry yum install -y squashfs-tools "$work/enroot.rpm" "$work/enroot+caps.rpm" || status=1
      ;;
    *) status=2 ;;
  esac
  rm -rf "$work"
  ((status != 2)) || die "enroot is not installed and fmcluster installs it only on Ubuntu and Amazon Linux; use an" \
    "image with enroot $ENROOT_VERSION"
  ((status == 0)) || die "enroot $ENROOT_VERSION or its dependencies (jq, parallel, squashfs-tools) could not be" \
    "installed from the mirror and the package repositories; $ADVICE"
  log INFO "installed enroot $ENROOT_VERSION"
}

# build_tools_present: gcc and make are on PATH, or the step fails naming what is missing. They are not installed here:
# a package repository is an internet host with `egress: none`. The DLAMIs build the NVIDIA driver's kernel module
# with DKMS, which needs both; that the PCS-Ready DLAMI keeps them is (unconfirmed) (docs/node-images.md).
build_tools_present() {
  local tool missing=()
  for tool in gcc make; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) || die "pyxis $PYXIS_VERSION is built on the node, but this image has no ${missing[*]} on" \
    "PATH (fmcluster installs no build tools: a package repository is outside the VPC's endpoints); use an image" \
    "that carries gcc and make, or one with enroot and pyxis installed"
}

# install_pyxis PREFIX: pyxis built against the Slurm under PREFIX and installed into PREFIX/lib/slurm.
install_pyxis() {
  local prefix="$1" work status=0
  [[ -f "$ROOT$prefix/include/slurm/spank.h" ]] ||
    die "pyxis must be built against this node's Slurm, but $prefix/include/slurm/spank.h is missing; $ADVICE"
  build_tools_present
  work="$(mktemp -d)"
  mirror_get "pyxis/$PYXIS_VERSION/v$PYXIS_VERSION.tar.gz" "$work/pyxis.tar.gz" &&
    tar -xzf "$work/pyxis.tar.gz" -C "$work" &&
    CPPFLAGS="-I$prefix/include" make -C "$work/pyxis-$PYXIS_VERSION" prefix="$prefix" install || status=1
  rm -rf "$work"
  ((status == 0)) || die "pyxis $PYXIS_VERSION could not be built against $prefix; $ADVICE"
  log INFO "built pyxis $PYXIS_VERSION against $prefix"
}

# local_disk: the directory enroot keeps its caches under.
local_disk() {
  local disk
  for disk in "${LOCAL_DISKS[@]}"; do
    if mountpoint -q "$ROOT$disk"; then
      printf '%s\n' "$disk"
      return 0
    fi
  done
  printf '/tmp\n'
}

configure_enroot() {
  local base="$1" dir
  for dir in cache data tmp; do
    mkdir -p "$ROOT$base/enroot/$dir"
    chmod 1777 "$ROOT$base/enroot/$dir"
  done
  # enroot expands $(id -u) and $(id -g) itself, for the user who runs it.
  write_file "$ROOT$ENROOT_CONF" 0644 <<EOF
# Written by fmcluster enroot-pyxis.sh; re-run it rather than editing this file.
ENROOT_RUNTIME_PATH /run/enroot/user-\$(id -u)
ENROOT_CACHE_PATH $base/enroot/cache/group-\$(id -g)
ENROOT_DATA_PATH $base/enroot/data/user-\$(id -u)
ENROOT_TEMP_PATH $base/enroot/tmp
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME y
ENROOT_RESTRICT_DEV no
ENROOT_ROOTFS_WRITABLE y
EOF
  if ((FMC_CHANGED)); then
    log INFO "wrote $ENROOT_CONF: caches and containers under $base/enroot, /dev shared with containers (EFA)"
  fi
  write_file "$ROOT$TMPFILES" 0644 <<EOF
# Written by fmcluster enroot-pyxis.sh: enroot's runtime and pyxis's state live on /run, which every boot empties;
# enroot's caches on $base, which a stop/start empties (applied again after /scratch is rebuilt: $DIRS_UNIT).
d /run/enroot 1777 root root -
d /run/pyxis 0755 root root -
d $base/enroot/cache 1777 root root -
d $base/enroot/data 1777 root root -
d $base/enroot/tmp 1777 root root -
EOF
  mkdir -p "$ROOT/run/enroot" "$ROOT/run/pyxis"
  chmod 1777 "$ROOT/run/enroot"
  chmod 0755 "$ROOT/run/pyxis"
  install_boot_unit "$DIRS_UNIT" \
    "fmcluster: enroot's directories on local disk, once fmcluster-scratch.service has (re)built /scratch" \
    "/usr/bin/systemd-tmpfiles --create $TMPFILES" multi-user.target "After=local-fs.target fmcluster-scratch.service"
}

# link_extra_hooks: enroot's extra Slurm hooks, linked where enroot runs hooks (a missing one only warns: containers
# still start, without PMI or PyTorch's variables from Slurm).
link_extra_hooks() {
  local hook
  mkdir -p "$ROOT$ENROOT_HOOKS"
  for hook in "${EXTRA_HOOKS[@]}"; do
    if [[ ! -f "$ROOT$ENROOT_EXTRA_HOOKS/$hook" ]]; then
      log WARN "enroot's $ENROOT_EXTRA_HOOKS/$hook is missing; containers start without it"
    elif [[ "$(readlink "$ROOT$ENROOT_HOOKS/$hook" || true)" != "$ENROOT_EXTRA_HOOKS/$hook" ]]; then
      ln -sfn "$ENROOT_EXTRA_HOOKS/$hook" "$ROOT$ENROOT_HOOKS/$hook.fmcluster-new"
      mv -T "$ROOT$ENROOT_HOOKS/$hook.fmcluster-new" "$ROOT$ENROOT_HOOKS/$hook"
      log INFO "enabled enroot's $hook hook"
    fi
  done
}

# slurmd_path PREFIX: every slurmd unit with PREFIX/bin on its PATH (50-slurm-pmi.sh runs scontrol), restarted when
# it runs and its drop-in changed.
slurmd_path() {
  local bin="$1/bin" unit
  local -a units
  mapfile -t units < <(slurmd_units)
  for unit in ${units[@]+"${units[@]}"}; do
    write_file "$ROOT/etc/systemd/system/$unit.d/fmcluster-path.conf" 0644 <<EOF
# Written by fmcluster enroot-pyxis.sh: enroot's 50-slurm-pmi.sh hook runs scontrol from slurmd's job steps.
[Service]
Environment=PATH=$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
    if ((FMC_CHANGED)); then
      systemctl daemon-reload
      log INFO "$unit has $bin on its PATH"
      if systemctl is-active --quiet "$unit"; then
        systemctl restart "$unit"
        log INFO "restarted $unit"
      fi
    fi
  done
}

# loads_pyxis FILE...: whether a plugin-stack line (not a comment) of any FILE loads pyxis.
loads_pyxis() {
  local file line
  for file in "$@"; do
    if [[ -f "$file" ]]; then
      while IFS= read -r line || [[ -n "$line" ]]; do
        if [[ "$line" != *([[:space:]])\#* && "$line" == *"$PYXIS_PLUGIN"* ]]; then
          return 0
        fi
      done <"$file"
    fi
  done
  return 1
}

# plugstack_dir PREFIX: the directory of this image's plugin-stack configuration.
plugstack_dir() {
  if [[ "$1" == /opt/slurm ]]; then
    printf '/opt/slurm/etc\n'
  elif [[ "$1" == /opt/aws/pcs/scheduler/slurm-* ]]; then
    printf '/etc/aws/pcs/scheduler/%s\n' "${1##*/}"
  else
    printf '/etc/slurm\n'
  fi
}

configure_pyxis() {
  local prefix="$1" plugin="$1/lib/slurm/$PYXIS_PLUGIN" etc stack ours include line file
  local -a lines=() foreign=()
  etc="$(plugstack_dir "$prefix")"
  stack="$ROOT$etc/plugstack.conf"
  ours="$ROOT$etc/plugstack.conf.d/pyxis.conf"
  shopt -s nullglob
  for file in "$ROOT$etc"/plugstack.conf.d/*; do
    if [[ "$file" != "$ours" ]]; then
      foreign+=("$file")
    fi
  done
  if loads_pyxis "$stack" ${foreign[@]+"${foreign[@]}"}; then
    log INFO "the Slurm plugin stack in $etc loads pyxis already"
    return 0
  fi
  write_file "$ours" 0644 <<<"required $plugin"
  if [[ "$etc" == /etc/aws/pcs/* ]]; then
    log INFO "pyxis ($plugin) is in PCS's SPANK directory $etc/plugstack.conf.d"
    return 0
  fi
  # Configless Slurm expands no wildcard in an include (base-config/utils/slurm_fix_plugstackconf.sh): name the file.
  include="include $etc/plugstack.conf.d/pyxis.conf"
  if [[ -f "$stack" ]]; then
    while IFS= read -r line || [[ -n "$line" ]]; do
      if [[ "$line" == "$include" ]]; then
        log INFO "pyxis ($plugin) is in the Slurm plugin stack"
        return 0
      fi
      lines+=("$line")
    done <"$stack"
  fi
  lines+=("$include")
  write_file "$stack" 0644 < <(printf '%s\n' "${lines[@]}")
  log INFO "pyxis ($plugin) added to the Slurm plugin stack in $etc"
}

main() {
  local base prefix
  local -a prefixes
  if (($#)); then
    printf 'usage: %s\n' "$0" >&2
    exit 2
  fi
  require_root
  shopt -s extglob
  mapfile -t prefixes < <(slurm_prefixes)
  if ((${#prefixes[@]} == 0)); then
    die "pyxis must be built against the cluster's Slurm ${FMCLUSTER_SLURM_VERSION:-from node.env}, which this" \
      "image lacks; use an" \
      "image that carries it (the PCS-Ready DLAMI's versions: README, supported images) or another slurm_version"
  fi
  if [[ "${prefixes[*]}" == /usr && ! -x "$ROOT/usr/bin/srun" ]]; then
    die "no Slurm on this node (looked in /opt/slurm, /opt/aws/pcs/scheduler/slurm-*, /usr); pyxis needs it"
  fi
  if ! command -v enroot >/dev/null 2>&1; then
    install_enroot
  fi
  # the cluster's Slurm version (FMCLUSTER_SLURM_VERSION, else /opt/fmcluster/node.env's); without either every
  # version of the image, as the PCS user guide ("Install SPANK plugins") asks
  for prefix in "${prefixes[@]}"; do
    if [[ ! -f "$ROOT$prefix/lib/slurm/$PYXIS_PLUGIN" ]]; then
      install_pyxis "$prefix"
    fi
  done
  base="$(local_disk)"
  if [[ "$base" == /tmp ]]; then
    log WARN "none of ${LOCAL_DISKS[*]} is mounted; enroot keeps its caches under /tmp"
  fi
  configure_enroot "$base"
  link_extra_hooks
  slurmd_path "${prefixes[-1]}"
  for prefix in "${prefixes[@]}"; do
    configure_pyxis "$prefix"
  done
}

main "$@"
