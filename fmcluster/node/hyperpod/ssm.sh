#!/usr/bin/env bash
# shellcheck shell=bash
#
# ssm.sh: reading SSM parameters that may not exist, for the HyperPod lifecycle scripts. Sourced, never run:
#
#     # shellcheck source=ssm.sh
#     source "$HERE/ssm.sh"
#
# ssm_get REGION NAME prints the parameter's value and succeeds; when the parameter does not exist it prints
# nothing and still succeeds (an SSM parameter value is never empty, so empty means absent); any other failure
# (throttling, no route to SSM, access denied) fails with the AWS CLI's message on stderr, so that
# `value="$(retry ssm_get "$region" "$name")"` retries what may pass and never retries what cannot.

ssm_get() {
  local errors status=0
  errors="$(mktemp)"
  aws ssm get-parameter --region "$1" --name "$2" --query Parameter.Value --output text 2>"$errors" || status=$?
  if ((status)) && [[ "$(<"$errors")" == *ParameterNotFound* ]]; then
    status=0
  elif ((status)); then
    cat "$errors" >&2
  fi
  rm -f "$errors"
  return "$status"
}
