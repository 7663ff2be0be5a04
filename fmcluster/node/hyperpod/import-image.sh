#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# import-image.sh: import the cluster's training image from ECR, once, into a squashfs file on the shared file system,
# so every node starts its containers from that file instead of each pulling the image from the registry:
#     srun --container-image=/fsx/enroot/images/training-image.sqsh ...
#
# Usage: import-image.sh SSM_PARAMETER_NAME MOUNT_POINT
#
# The SSM parameter holds a private ECR image URI with a tag, in the node's region, e.g.
# 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:v3, maybe followed by @sha256:<digest> as the image build
# publishes it (the import goes by the tag: fmcluster's ECR tags are immutable). No such parameter: nothing to import (exit 0, logged). Any
# other registry is refused: nodes never pull from the public internet, and may have no path to it.
# The image becomes MOUNT_POINT/enroot/images/<repository, '/' as '+'>+<tag>.sqsh, made with `enroot import` (ECR
# credentials from `aws ecr get-login-password`, in a private directory removed afterwards); training-image.sqsh
# beside it links to the newest import and training-image.uri names it. An image imported before is not imported
# again. A lock directory (<image>.sqsh.lock, made with mkdir, which one node wins) makes sure only one node imports:
# a node that finds it leaves the work to its holder, unless the lock is older than FMCLUSTER_IMPORT_LOCK_STALE
# seconds (default 7200), when it takes over. Taking over is a rename of the stale lock to a name of this node's
# (one rename of a directory succeeds, the others find it gone), and only the node that moved the very lock it
# judged stale (same owner line) may then make a new one; a node that moved a fresh lock by mistake puts it back. A
# holder removes the lock at the end only while it still holds it. Each importer writes its own partial file
# (<image>.sqsh.partial.<host>.<pid>), renamed over <image>.sqsh when complete, so even two importers never share
# one, and a job never sees half an image.
# The link is replaced only when it changes, atomically: a new link under a temporary name renamed over the old one
# (`mv -T`, rename(2)); `ln -sfn` unlinks and re-creates it (not atomic on coreutils 8.22), so a job starting in
# between would find no image.
# AWS calls and the import are retried with backoff (lib.sh).
# Log: /var/log/fmcluster/import-image.log
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib.sh
source "$(dirname "$HERE")/lib.sh" # one layout on every node (fmcluster.node_files): node/hyperpod/ below node/
# shellcheck source=ssm.sh
source "$HERE/ssm.sh"

ECR_IMAGE='^([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?/([a-z0-9][a-z0-9._/-]*):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})(@sha256:[0-9a-f]{64})?$'
STALE_SECONDS="${FMCLUSTER_IMPORT_LOCK_STALE:-7200}"
LINK_NAME=training-image.sqsh
LOCK=""
TOKEN=""
WORK=""
PARTIAL=""

usage() {
  printf 'usage: %s SSM_PARAMETER_NAME MOUNT_POINT\n' "$0" >&2
  exit 2
}

# take_lock DIR: hold DIR as the import lock; fails when another node holds a lock that is not stale.
take_lock() {
  local lock="$1" owner modified age aside
  if mkdir "$lock" 2>/dev/null; then
    take_lock_owned "$lock"
    return 0
  fi
  owner="$(cat "$lock/owner" 2>/dev/null || true)"
  if ! modified="$(stat -c %Y "$lock" 2>/dev/null)"; then
    mkdir "$lock" 2>/dev/null && take_lock_owned "$lock" # released in the meantime
    return
  fi
  age=$(($(date +%s) - modified))
  if ((age <= STALE_SECONDS)); then
    log INFO "${lock#"$ROOT"} is held by ${owner:-an unknown node} (${age}s ago): that node imports the image; nothing to do here"
    return 1
  fi
  aside="$lock.stale.$(hostname).$$"
  if ! mv -T "$lock" "$aside" 2>/dev/null; then
    log INFO "${lock#"$ROOT"} was taken over by another node first; nothing to do here"
    return 1
  fi
  if [[ "$(cat "$aside/owner" 2>/dev/null || true)" != "$owner" ]]; then
    # another node replaced the stale lock between our look and our rename: its lock goes back
    mv -T "$aside" "$lock" 2>/dev/null || log WARN "could not give ${lock#"$ROOT"} back to its holder"
    log INFO "${lock#"$ROOT"} was taken over by another node first; nothing to do here"
    return 1
  fi
  rm -rf "$aside"
  log WARN "${lock#"$ROOT"} was ${age}s old (held by ${owner:-an unknown node}), past ${STALE_SECONDS}s: taking the import over"
  if ! mkdir "$lock" 2>/dev/null; then
    log INFO "${lock#"$ROOT"} was taken by another node first; nothing to do here"
    return 1
  fi
  take_lock_owned "$lock"
}

# take_lock_owned DIR: DIR (just made) becomes this process's lock.
take_lock_owned() {
  TOKEN="$(hostname) pid $$ since $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf '%s\n' "$TOKEN" >"$1/owner"
  LOCK="$1"
}

cleanup() {
  if [[ -n "$WORK" ]]; then
    rm -rf "$WORK"
  fi
  if [[ -n "$PARTIAL" ]]; then
    rm -f "$PARTIAL"
  fi
  # only a lock still ours: a takeover may have given it to another node meanwhile
  if [[ -n "$LOCK" && "$(cat "$LOCK/owner" 2>/dev/null || true)" == "$TOKEN" ]]; then
    rm -rf "$LOCK"
  fi
}

# link IMAGES NAME URI: point training-image.sqsh at NAME, atomically and only when it points elsewhere, and record
# URI in training-image.uri (rewritten only when it changed).
link() {
  local images="$1" name="$2" tmp
  if [[ "$(readlink "$images/$LINK_NAME" 2>/dev/null || true)" != "$name" ]]; then
    tmp="$images/.$LINK_NAME.$(hostname).$$"
    ln -s "$name" "$tmp"
    mv -T "$tmp" "$images/$LINK_NAME"
    log INFO "${images#"$ROOT"}/$LINK_NAME -> $name"
  fi
  write_file "$images/training-image.uri" 0644 <<<"$3"
}

main() {
  local parameter mount aws_region uri registry image_region repository tag images name target password
  (($# == 2)) || usage
  parameter="$1"
  mount="$2"
  require_root
  command -v enroot >/dev/null 2>&1 || die "enroot is not installed; run enroot-pyxis.sh's checks first"
  command -v aws >/dev/null 2>&1 || die "the AWS CLI is not installed; cannot read SSM parameter $parameter"
  aws_region="$(region)" || die "cannot tell the AWS region"

  if ! uri="$(retry ssm_get "$aws_region" "$parameter")"; then
    die "SSM parameter $parameter could not be read"
  fi
  if [[ -z "$uri" ]]; then
    log INFO "SSM parameter $parameter does not exist: no training image to import; skipping"
    return 0
  fi
  if [[ ! "$uri" =~ $ECR_IMAGE ]]; then
    die "SSM parameter $parameter: '$uri' is not a private ECR image with a tag, like" \
      "123456789012.dkr.ecr.$aws_region.amazonaws.com/train:v1; fmcluster imports only from ECR, never from the internet"
  fi
  registry="${uri%%/*}"
  image_region="${BASH_REMATCH[2]}"
  repository="${BASH_REMATCH[4]}"
  tag="${BASH_REMATCH[5]}"
  if [[ "$image_region" != "$aws_region" ]]; then
    die "SSM parameter $parameter: the image is in $image_region, the cluster in $aws_region; push it to ECR in" \
      "$aws_region (nodes reach ECR through their own region's endpoints)"
  fi
  if ! retry mountpoint -q "$ROOT$mount"; then
    die "$mount is not mounted; the image is kept on the shared file system"
  fi

  images="$ROOT$mount/enroot/images"
  name="${repository//\//+}+$tag.sqsh"
  target="$images/$name"
  mkdir -p "$images"
  if [[ -f "$target" ]]; then
    log INFO "$uri is imported already: ${target#"$ROOT"}"
    link "$images" "$name" "$uri"
    return 0
  fi
  trap cleanup EXIT
  if ! take_lock "$target.lock"; then
    return 0
  fi

  password="$(retry aws ecr get-login-password --region "$aws_region")" || die "cannot get an ECR login password"
  WORK="$(mktemp -d)"
  chmod 0700 "$WORK"
  # enroot reads registry credentials in netrc form from $ENROOT_CONFIG_PATH/.credentials.
  (
    umask 077
    printf 'machine %s login AWS password %s\n' "$registry" "$password" >"$WORK/.credentials"
  )
  if [[ -f "$target" ]]; then # imported by the node that held the lock before us
    link "$images" "$name" "$uri"
    return 0
  fi
  PARTIAL="$target.partial.$(hostname).$$"
  import_once() {
    rm -f "$PARTIAL"
    ENROOT_CONFIG_PATH="$WORK" enroot import --output "$PARTIAL" "docker://$registry#$repository:$tag"
  }
  log INFO "importing $uri into ${target#"$ROOT"}"
  retry import_once || die "enroot could not import $uri (see the lines above)"
  chmod 0644 "$PARTIAL"
  mv -f "$PARTIAL" "$target"
  PARTIAL=""
  link "$images" "$name" "$uri"
  log INFO "imported $uri: ${target#"$ROOT"}, linked as $LINK_NAME"
}

main "$@"
