#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# users.sh: the cluster file's `users` on this node: the same uid and gid everywhere, homes on the shared file system,
# SSH keys and sudo for admins (their Slurm associations: slurm-accounting.sh, on the node that reaches slurmdbd).
#
# Usage: users.sh apply USERS_FILE [--home-base DIR]
#        users.sh sync SSM_PARAMETER_NAME [--home-base DIR]
#        users.sh install SSM_PARAMETER_NAME [--home-base DIR]
#
#   apply    the users of USERS_FILE, as below
#   sync     reads the SSM parameter (`aws ssm get-parameter`, retried: through the VPC's SSM endpoint and the node's
#            role, no internet) and applies it only when its SHA-256 differs from the last sync that succeeded
#            (/var/lib/fmcluster/users.sha256, which also keeps the home base the first sync chose). The node steps
#            always pass --home-base (the file's: /fsx/home with Lustre, /home without), so a file system unmounted
#            for a moment never moves homes: while nothing is mounted at a base's parent (/fsx for /fsx/home), the
#            sync fails, records nothing and the next one tries again; an unchanged parameter changes nothing and
#            logs nothing
#   install  a sync at once (its status is the step's), then a systemd timer (fmcluster-users.timer: every 10
#            minutes, each node at its own fixed offset within them) that runs `sync`: a user added to the cluster file and deployed
#            later reaches the running nodes, which neither orchestrator sets up again (HyperPod runs lifecycle
#            scripts when a node is created; fmcluster's PCS lifecycle actions run at first boot)
#
# USERS_FILE (or the SSM parameter's value) holds one user per
# line, `NAME UID ADMIN [KEY_TYPE KEY_BASE64]`, ADMIN 1 or 0, as fmcluster renders the cluster file's `users`
# (fmcluster/config/users.py, which also holds the rules every value already passed). For each user:
#   group    NAME with gid = UID (user private groups: unique because uids are)
#   account  NAME with uid UID, that group, /bin/bash, home HOME_BASE/NAME; an existing account of that name and uid
#            is kept (and unlocked if an earlier run locked it). A name or uid taken by another account or group on
#            this image fails that user, named in one line: the file's rules keep clear of the images' accounts, so
#            that is an image fmcluster does not know
#   home     HOME_BASE/NAME, made once (with /etc/skel) by whichever node gets there first, mode 0700. HOME_BASE:
#            --home-base, else /fsx/home when /fsx is a mount point, else /home with a WARNING that homes are local
#            to each node (a cluster without a shared file system)
#   ssh key  /etc/fmcluster/authorized_keys/NAME (local, root-owned, 0644), which sshd reads besides
#            ~/.ssh/authorized_keys (/etc/ssh/sshd_config.d/60-fmcluster-users.conf; Ubuntu's sshd_config includes
#            that directory): nothing is written into homes on the shared file system by root
#   sudo     /etc/sudoers.d/90-fmcluster-users: `NAME ALL=(ALL) NOPASSWD:ALL` for admins only, checked with
#            `visudo -cf` before it replaces the old file (removed when no user is an admin)
# Users that an earlier run made and the file no longer lists are locked (expired, shell /usr/sbin/nologin) and lose
# their key and sudo; their home and files stay, as does their Slurm association (slurm-accounting.sh never removes one).
# The users made are kept in /var/lib/fmcluster/users.
#
# Idempotent; one run at a time (flock on /run/lock/fmcluster-users.lock). Exit status 1 when any user failed (one line
# each, all users tried).
# Log: /var/log/fmcluster/users.log
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE_FILE="$ROOT/var/lib/fmcluster/users"
SYNCED_FILE="$ROOT/var/lib/fmcluster/users.sha256"
UNIT=fmcluster-users
LOCK_FILE="$ROOT/run/lock/fmcluster-users.lock"
LOCK_WAIT="${FMCLUSTER_USERS_LOCK_WAIT:-300}" # seconds; the tests shorten it
KEYS_DIR=/etc/fmcluster/authorized_keys
SUDOERS="$ROOT/etc/sudoers.d/90-fmcluster-users"
SSHD_DROP_IN="$ROOT/etc/ssh/sshd_config.d/60-fmcluster-users.conf"
LOCKED_EXPIRY=1 # shadow(5) field 8, days since 1970: expired on 1970-01-02, so PAM refuses every login

usage() {
  printf 'usage: %s apply USERS_FILE | sync SSM_PARAMETER_NAME | install SSM_PARAMETER_NAME [--home-base DIR]\n' \
    "$0" >&2
  exit 2
}

# shadow_args: useradd/groupadd/usermod's --prefix when FMCLUSTER_ROOT redirects /etc (the tests); nothing on a node.
shadow_args() {
  if [[ -n "$ROOT" ]]; then
    printf '%s\n' --prefix "$ROOT"
  fi
}

# entry FILE FIELD VALUE: the first line of a passwd-style FILE whose FIELD (1-based) is VALUE.
entry() {
  awk -F: -v field="$2" -v value="$3" '$field == value { print; exit }' "$ROOT/etc/$1"
}

home_base() {
  if [[ -n "$1" ]]; then
    printf '%s\n' "$1"
  elif mountpoint -q "$ROOT$SHARED_MOUNT" 2>/dev/null; then
    printf '%s/home\n' "$SHARED_MOUNT"
  else
    log WARN "no shared file system at $SHARED_MOUNT: homes are under /home, local to this node (files written on" \
      "one node are not seen on another)"
    printf '/home\n'
  fi
}

# ensure_group NAME GID
ensure_group() {
  local name="$1" gid="$2" found
  local -a prefix
  mapfile -t prefix < <(shadow_args)
  found="$(entry group 1 "$name")"
  if [[ -n "$found" ]]; then
    [[ "$(cut -d: -f3 <<<"$found")" == "$gid" ]] && return 0
    log ERROR "user $name: group $name exists with gid $(cut -d: -f3 <<<"$found"), not $gid"
    return 1
  fi
  found="$(entry group 3 "$gid")"
  if [[ -n "$found" ]]; then
    log ERROR "user $name: gid $gid belongs to group $(cut -d: -f1 <<<"$found") on this image"
    return 1
  fi
  groupadd ${prefix[@]+"${prefix[@]}"} --gid "$gid" "$name"
  log INFO "group $name (gid $gid) added"
}

# ensure_account NAME UID HOME
ensure_account() {
  local name="$1" uid="$2" home="$3" found
  local -a prefix
  mapfile -t prefix < <(shadow_args)
  found="$(entry passwd 1 "$name")"
  if [[ -z "$found" ]]; then
    found="$(entry passwd 3 "$uid")"
    if [[ -n "$found" ]]; then
      log ERROR "user $name: uid $uid belongs to $(cut -d: -f1 <<<"$found") on this image"
      return 1
    fi
    useradd ${prefix[@]+"${prefix[@]}"} --uid "$uid" --gid "$uid" --no-create-home --home-dir "$home" \
      --shell /bin/bash "$name"
    log INFO "user $name (uid $uid, gid $uid, home $home) added"
    return 0
  fi
  if [[ "$(cut -d: -f3 <<<"$found")" != "$uid" ]]; then
    log ERROR "user $name exists with uid $(cut -d: -f3 <<<"$found"), not $uid"
    return 1
  fi
  if [[ "$(cut -d: -f6 <<<"$found")" != "$home" || "$(cut -d: -f4 <<<"$found")" != "$uid" ]]; then
    usermod ${prefix[@]+"${prefix[@]}"} --gid "$uid" --home "$home" "$name"
    log INFO "user $name: home $home, group $name"
  fi
  if [[ "$(entry shadow 1 "$name" | cut -d: -f8)" == "$LOCKED_EXPIRY" ]]; then
    usermod ${prefix[@]+"${prefix[@]}"} --expiredate '' --shell /bin/bash "$name"
    log INFO "user $name unlocked (listed again)"
  fi
}

# ensure_home NAME UID HOME: made once, by whichever node creates the directory (mkdir is atomic on Lustre too).
ensure_home() {
  local name="$1" uid="$2" home="$ROOT$3"
  mkdir -p "$(dirname "$home")"
  if mkdir "$home" 2>/dev/null; then
    if [[ -d "$ROOT/etc/skel" ]]; then
      cp -a "$ROOT/etc/skel/." "$home/"
    fi
    chown -R "$uid:$uid" "$home"
    log INFO "home ${home#"$ROOT"} made for $name"
  fi
  chown "$uid:$uid" "$home"
  chmod 0700 "$home"
}

# ensure_key NAME KEY: the user's key in the local keys directory (or none).
ensure_key() {
  local name="$1" key="$2"
  if [[ -z "$key" ]]; then
    rm -f "$ROOT$KEYS_DIR/$name"
    return 0
  fi
  write_file "$ROOT$KEYS_DIR/$name" 0644 <<<"$key"
  if ((FMC_CHANGED)); then
    log INFO "user $name: SSH key $(cut -d' ' -f1 <<<"$key") installed"
  fi
}

# write_sshd_drop_in: sshd also reads the local keys directory; reloaded when that changed (and sshd runs).
write_sshd_drop_in() {
  write_file "$SSHD_DROP_IN" 0644 <<EOF
# fmcluster users.sh: the cluster file's SSH keys, besides the users' own
AuthorizedKeysFile .ssh/authorized_keys $KEYS_DIR/%u
EOF
  if ((FMC_CHANGED)) && [[ -z "$ROOT" ]] && systemctl is-active --quiet ssh.service 2>/dev/null; then
    systemctl reload ssh.service || log WARN "sshd reload failed; the cluster file's keys work after its restart"
  fi
}

# write_sudoers ADMIN...: the admins' sudo, checked by visudo (when the image has it) before it replaces the old file.
write_sudoers() {
  local tmp
  if (($# == 0)); then
    rm -f "$SUDOERS"
    return 0
  fi
  mkdir -p "$(dirname "$SUDOERS")"
  tmp="$(mktemp "$SUDOERS.XXXXXX")"
  {
    printf '# fmcluster users.sh: the cluster file users with admin: true\n'
    printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$@"
  } >"$tmp"
  chmod 0440 "$tmp"
  if command -v visudo >/dev/null 2>&1 && ! visudo -cqf "$tmp"; then
    rm -f "$tmp"
    log ERROR "visudo refused the sudoers file for $*; admins keep the sudo they had"
    return 1
  fi
  mv -f "$tmp" "$SUDOERS"
}

# lock_removed NAME...: lock the accounts an earlier run made that are no longer listed.
lock_removed() {
  local name
  local -a prefix
  mapfile -t prefix < <(shadow_args)
  [[ -f "$STATE_FILE" ]] || return 0
  while read -r name; do
    [[ -n "$name" && " $* " != *" $name "* ]] || continue
    if [[ -n "$(entry passwd 1 "$name")" && "$(entry shadow 1 "$name" | cut -d: -f8)" != "$LOCKED_EXPIRY" ]]; then
      usermod ${prefix[@]+"${prefix[@]}"} --expiredate "$LOCKED_EXPIRY" --shell /usr/sbin/nologin "$name"
      log INFO "user $name locked: no longer in the cluster file (home kept)"
    fi
    rm -f "$ROOT$KEYS_DIR/$name"
  done <"$STATE_FILE"
}

# apply_user NAME UID HOME KEY: one user's group, account, home and key; run through `checked`, so any command that
# fails (a groupadd that cannot lock /etc/group, a chown on a read-only home) fails the user.
apply_user() {
  local name="$1" uid="$2" home="$3" key="$4"
  ensure_group "$name" "$uid"
  ensure_account "$name" "$uid" "$home"
  ensure_home "$name" "$uid" "$home"
  ensure_key "$name" "$key"
}

apply() {
  local file="$1" base="$2" name uid admin kind blob failed=0
  local -a listed=() names=() admins=()
  base="$(home_base "$base")"
  while read -r name uid admin kind blob; do
    [[ -n "$name" && "$name" != "#"* ]] || continue # an empty line or a comment (users.py NO_USERS)
    listed+=("$name") # listed, applied or not: a user who fails this time is retried, never locked as removed
    checked apply_user "$name" "$uid" "$base/$name" "${kind:+$kind $blob}"
    if ((CHECKED_STATUS != 0)); then
      log ERROR "user $name: not applied (exit status $CHECKED_STATUS); the next sync tries again"
      failed=1
      continue
    fi
    names+=("$name")
    if [[ "$admin" == 1 ]]; then
      admins+=("$name")
    fi
  done <"$file"
  write_sshd_drop_in
  checked write_sudoers ${admins[@]+"${admins[@]}"}
  ((CHECKED_STATUS == 0)) || failed=1
  lock_removed ${listed[@]+"${listed[@]}"}
  mkdir -p "$(dirname "$STATE_FILE")"
  printf '%s\n' ${listed[@]+"${listed[@]}"} >"$STATE_FILE"
  log INFO "users: ${names[*]:-none}; admins: ${admins[*]:-none}"
  return "$failed"
}

# sync PARAMETER BASE: apply the parameter's users when they changed since the last sync that succeeded. The home
# base is chosen once, at the first sync (BASE, else home_base), and kept: a file system unmounted for a moment must
# not move everyone's home to /home. While it is not mounted, nothing is applied (the next sync tries again).
sync() {
  local parameter="$1" base="$2" tmp status=0 sum previous="" previous_base=""
  if [[ -f "$SYNCED_FILE" ]]; then
    read -r previous previous_base <"$SYNCED_FILE" || true
  fi
  base="${base:-$previous_base}"
  if [[ -z "$base" ]]; then
    base="$(home_base "")"
  elif [[ "$base" != /home ]] && ! mountpoint -q "$ROOT$(dirname "$base")" 2>/dev/null; then
    die "the homes are under $base, but nothing is mounted at $(dirname "$base") now: users not synced (the next" \
      "sync tries again)"
  fi
  tmp="$(mktemp)"
  if ! retry aws ssm get-parameter --region "$(region)" --name "$parameter" --query Parameter.Value \
    --output text >"$tmp"; then
    rm -f "$tmp"
    die "could not read the users from SSM parameter $parameter"
  fi
  sum="$(sha256sum <"$tmp" | cut -d' ' -f1)"
  if [[ "$sum" == "$previous" && "$base" == "$previous_base" ]]; then
    rm -f "$tmp"
    return 0
  fi
  previous="${previous:0:12}"
  log INFO "users of $parameter changed (sha256 ${sum:0:12}, was ${previous:-none}): applying"
  checked apply "$tmp" "$base"
  status=$CHECKED_STATUS
  rm -f "$tmp"
  if ((status == 0)); then
    write_file "$SYNCED_FILE" 0644 <<<"$sum $base"
  else
    write_file "$SYNCED_FILE" 0644 <<<"- $base" # tried again at the next sync, changed or not
  fi
  return "$status"
}

# install PARAMETER BASE: a sync now, then the timer that syncs every 10 minutes (after the sync: a timer started
# past its OnBootSec runs at once, and finds nothing changed).
install() {
  local parameter="$1" base="$2" arguments status
  checked sync "$parameter" "$base"
  status=$CHECKED_STATUS
  arguments="$(printf ' %q' "$parameter" ${base:+--home-base "$base"})"
  install_timed_service "$UNIT" "fmcluster: the cluster file's users on this node (SSM $parameter)" \
    "/usr/bin/env bash /opt/fmcluster/node/users.sh sync$arguments" network-online.target \
    "fmcluster: the cluster file's users, every 10 minutes" OnBootSec=10min OnUnitActiveSec=10min \
    RandomizedDelaySec=10min FixedRandomDelay=yes
  return "$status"
}

# locked COMMAND...: COMMAND while holding the users lock, so the timer's sync, the boot step and an administrator's
# run never change the accounts at the same time (waits up to LOCK_WAIT seconds).
locked() {
  mkdir -p "$(dirname "$LOCK_FILE")"
  exec 9>"$LOCK_FILE"
  if ! flock -w "$LOCK_WAIT" 9; then
    die "another users.sh still runs after ${LOCK_WAIT}s (lock $LOCK_FILE)"
  fi
  "$@"
}

main() {
  local verb="${1:-}" source="${2:-}" base=""
  (($# >= 2)) || usage
  shift 2
  while (($#)); do
    case "$1" in
      --home-base)
        (($# >= 2)) || usage
        base="$2"
        shift 2
        ;;
      *) usage ;;
    esac
  done
  require_root
  case "$verb" in
    apply) locked apply "$source" "$base" ;;
    sync) locked sync "$source" "$base" ;;
    install) locked install "$source" "$base" ;;
    *) usage ;;
  esac
}

main "$@"
