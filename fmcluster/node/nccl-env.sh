#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# nccl-env.sh: install the environment that makes NCCL use EFA well, for every job, container, login shell and service.
#
# Usage: nccl-env.sh [SSM_PARAMETER_NAME]
#
# Writes the same variables to
#   /etc/profile.d/fmcluster-nccl.sh   `export NAME='value'` lines, read by login shells (srun, sbatch, ssh)
#   /etc/fmcluster/nccl.env            `NAME=value` lines, for systemd EnvironmentFile= and `docker run --env-file`;
#                                      Slurm's TaskProlog (slurm/task-prolog.sh) exports them into every job's tasks,
#                                      batch scripts included (sbatch hands over the submitter's environment, not this)
#   /etc/enroot/hooks.d/50-fmcluster-nccl.sh   an enroot hook that puts nccl.env's variables into every enroot/pyxis
#                                      container, except those the job sets itself: a user's own NCCL_DEBUG (or any
#                                      NCCL_*, FI_*, OFI_NCCL_*) wins. enroot runs hooks with the caller's (the job
#                                      step's) environment and ENROOT_ENVIRON, the file that becomes the container's
#                                      environment (src/runtime.sh, v4.1.2, as its own 50-slurm-pytorch.sh uses it);
#                                      pyxis then sets the container's environment over the job's
#                                      (spank_import_container_env, pyxis v0.24.0), so a plain environ.d file would
#                                      silently replace the user's value (the former 50-fmcluster-nccl.env, removed).
#
# Defaults: only what the aws-ofi-nccl plugin does not already set for itself (its doc/efa-env-var.md, v1.21):
#   NCCL_SOCKET_IFNAME=^docker,lo,veth   NCCL's own socket traffic (bootstrap) avoids container and loopback links
# The plugin picks FI_PROVIDER, FI_EFA_FORK_SAFE, NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE, its tuner and more by
# instance type; setting them here would override its better choices, so they are left out.
#
# With SSM_PARAMETER_NAME, the parameter's value (read with `aws ssm get-parameter`, retried with backoff) is a
# JSON object of variables, e.g. {"NCCL_DEBUG": "WARN", "FI_EFA_USE_HUGE_PAGE": "0"}: names match
# ^(NCCL|FI|OFI_NCCL)_[A-Z0-9_]+$, values are strings or whole numbers on one line. They are laid over the
# defaults. When the parameter cannot be read, or its value is not such an object, the defaults alone are
# written and the log says why.
# Log: /var/log/fmcluster/nccl-env.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROFILE_FILE=/etc/profile.d/fmcluster-nccl.sh
ENV_FILE=/etc/fmcluster/nccl.env
ENROOT_HOOK=/etc/enroot/hooks.d/50-fmcluster-nccl.sh
OLD_ENROOT_ENV_FILE=/etc/enroot/environ.d/50-fmcluster-nccl.env

# parse_variables JSON: NAME=value lines, sorted by name; fails (with the reason on stderr) on anything else.
parse_variables() {
  python3 -c '
import json, os, re, sys
try:
    data = json.loads(sys.argv[1])
except ValueError as error:
    sys.exit(f"not JSON: {error}")
if not isinstance(data, dict):
    sys.exit(f"expected a JSON object of variables, got {type(data).__name__}")
for name in sorted(data):
    value = data[name]
    if not re.fullmatch(os.environ["NCCL_ENV_KEY_PATTERN"], name):
        sys.exit(f"{name!r} is not an NCCL, libfabric or aws-ofi-nccl variable")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        sys.exit(f"{name}: value must be a string or a whole number, got {json.dumps(value)}")
    value = str(value)
    if any(c in value for c in "\n\r\0"):
        sys.exit(f"{name}: value must be one line")
    print(f"{name}={value}")
' "$1"
}

main() {
  local parameter="${1:-}" origin="fmcluster defaults" value parsed line name aws_region profile env_lines
  local -A variables=([NCCL_SOCKET_IFNAME]='^docker,lo,veth')
  local -a names
  if (($# > 1)); then
    printf 'usage: %s [SSM_PARAMETER_NAME]\n' "$0" >&2
    exit 2
  fi
  require_root

  if [[ -n "$parameter" ]]; then
    if ! command -v aws >/dev/null 2>&1; then
      log WARN "the AWS CLI is not installed; cannot read SSM parameter $parameter; using the defaults"
    elif ! aws_region="$(region)"; then
      log WARN "cannot tell the AWS region; using the defaults"
    elif ! value="$(retry aws ssm get-parameter --region "$aws_region" --name "$parameter" \
      --query Parameter.Value --output text)"; then
      log WARN "SSM parameter $parameter could not be read; using the defaults"
    elif ! parsed="$(parse_variables "$value" 2>&1)"; then
      log ERROR "SSM parameter $parameter: $parsed; using the defaults"
    else
      while IFS= read -r line; do
        if [[ -n "$line" ]]; then
          variables["${line%%=*}"]="${line#*=}"
        fi
      done <<<"$parsed"
      origin="SSM parameter $parameter"
    fi
  fi

  mapfile -t names < <(printf '%s\n' "${!variables[@]}" | sort)
  profile="# Written by fmcluster nccl-env.sh from $origin; re-run it rather than editing this file."
  env_lines="$profile"
  for name in "${names[@]}"; do
    value="${variables[$name]}"
    profile+=$'\n'"export $name='${value//\'/\'\\\'\'}'"
    env_lines+=$'\n'"$name=$value"
  done
  write_file "$ROOT$PROFILE_FILE" 0644 <<<"$profile"
  write_file "$ROOT$ENV_FILE" 0644 <<<"$env_lines"
  write_file "$ROOT$ENROOT_HOOK" 0755 < <(printf '%s\n' '#!/bin/bash' "pattern='$NCCL_ENV_KEY_PATTERN'" && cat <<'EOF'
# Written by fmcluster nccl-env.sh: the node's NCCL environment (/etc/fmcluster/nccl.env) in the container, except the
# variables the job sets itself (its own value wins; enroot runs this with the job step's environment). `pattern`:
# the names it takes (the cluster file's rule, node_scripts.NODE_RULES).
env_file="${FMCLUSTER_ROOT:-}/etc/fmcluster/nccl.env"
[[ -r "$env_file" && -n "${ENROOT_ENVIRON:-}" ]] || exit 0
while IFS= read -r line || [[ -n "$line" ]]; do
  name="${line%%=*}"
  if [[ "$line" == *=* && "$name" =~ $pattern && -z "${!name+set}" ]]; then
    printf '%s\n' "$line" >>"$ENROOT_ENVIRON"
  fi
done <"$env_file"
exit 0
EOF
  )
  rm -f "$ROOT$OLD_ENROOT_ENV_FILE"
  log INFO "NCCL environment from $origin: ${names[*]}"
}

main "$@"
