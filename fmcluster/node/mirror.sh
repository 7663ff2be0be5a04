#!/usr/bin/env bash
# shellcheck shell=bash
#
# mirror.sh: install files from the project's in-account mirror only. Sourced after lib.sh, never run:
#
#     # shellcheck source=mirror.sh
#     source "$(dirname "${BASH_SOURCE[0]}")/mirror.sh"
#     mirror_get node_exporter/1.10.2/node_exporter-1.10.2.linux-amd64.tar.gz "$tmp/node_exporter.tar.gz"
#
# Gives mirror_get KEY DEST: the file KEY of the mirror (FMCLUSTER_ARTIFACT_MIRROR, s3://<bucket>/fmcluster-mirror,
# set by the cluster's node settings) copied with `aws s3 cp` (through the VPC's S3 gateway endpoint, in every egress mode;
# retried with lib.sh's backoff, so a mirror still being filled is waited for) into DEST, and kept only when its
# SHA-256 is the one pinned below. The pins are rendered from fmcluster/mirror/artifacts.json, the one list of what
# nodes install, and travel with the node scripts: nothing a node trusts is read from the mirror. A key without a pin
# (its digest is unconfirmed) is refused, naming it. No node script downloads from anywhere else.

declare -gA MIRROR_SHA256=()
# --- pinned digests rendered from fmcluster/mirror/artifacts.json (fmcluster.mirror); do not edit here ---
MIRROR_SHA256['pyxis/0.24.0/v0.24.0.tar.gz']=9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4
MIRROR_SHA256['node_exporter/1.10.2/node_exporter-1.10.2.linux-amd64.tar.gz']=c46e5b6f53948477ff3a19d97c58307394a29fe64a01905646f026ddc32cb65b
MIRROR_SHA256['prometheus/3.8.1/prometheus-3.8.1.linux-amd64.tar.gz']=a09972ced892cd298e353eb9559f1a90f499da3fb4ff0845be352fc138780ee7
MIRROR_SHA256['node_exporter/1.10.2/node_exporter-1.10.2.linux-arm64.tar.gz']=de69ec8341c8068b7c8e4cfe3eb85065d24d984a3b33007f575d307d13eb89a6
MIRROR_SHA256['prometheus/3.8.1/prometheus-3.8.1.linux-arm64.tar.gz']=8d95804e692bba65a48d32ecdfb3d4acd8e1560d440c8cc08f48167cb838ec4b
# --- end of pinned digests ---

# The mirror's S3 prefix as the scripts take it (the construct checks the URI it renders with the cluster file's
# S3 URI rule, node_scripts.py; this guard is looser: it does not refuse white space after the bucket name).
MIRROR_URI_PATTERN='^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$'

# mirror_get KEY DEST: see above. Returns 1 (the reason logged) when KEY has no pin, there is no mirror, the copy
# failed or the digest differs (DEST is then removed).
mirror_get() {
  local key="$1" dest="$2" expected actual
  expected="${MIRROR_SHA256[$key]:-}"
  if [[ -z "$expected" ]]; then
    log ERROR "$key has no pinned SHA-256 in fmcluster's artifact list (its digest is unconfirmed): not installing" \
      "it; see fmcluster/mirror/README.md (pinning an artifact)"
    return 1
  fi
  if [[ ! "${FMCLUSTER_ARTIFACT_MIRROR:-}" =~ $MIRROR_URI_PATTERN ]]; then
    log ERROR "no mirror to take $key from: FMCLUSTER_ARTIFACT_MIRROR must be an S3 prefix like s3://bucket/fmcluster-mirror;" \
      "got '${FMCLUSTER_ARTIFACT_MIRROR:-}'"
    return 1
  fi
  if ! retry aws s3 cp --only-show-errors --region "$(region)" "${FMCLUSTER_ARTIFACT_MIRROR%/}/$key" "$dest"; then
    log ERROR "$key could not be copied from ${FMCLUSTER_ARTIFACT_MIRROR%/}"
    return 1
  fi
  read -r actual _ < <(sha256sum "$dest")
  if [[ "$actual" != "$expected" ]]; then
    rm -f "$dest"
    log ERROR "checksum mismatch for $key from the mirror: expected $expected (pinned), got $actual"
    return 1
  fi
}
