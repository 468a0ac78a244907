#!/usr/bin/env bash
# Install Debian's redis-server for the Redis session-store tests (tests/chat/test_redis_sessions.py).
#
#   scripts/install_redis.sh
#
# Only the binary is needed: the tests start their own redis-server on a free port, so no
# system service is started (policy-rc.d blocks it during the install) and none is required.
# Idempotent and quiet: exits at once when `redis-server` is on PATH; runs `apt-get update`
# only when apt does not know the package yet. On failure it prints apt's output and exits
# non-zero.
set -euo pipefail

PACKAGE=redis-server

fail() {
    printf 'install_redis: %s\n' "$*" >&2
    exit 1
}

command -v redis-server >/dev/null 2>&1 && exit 0

command -v apt-get >/dev/null 2>&1 ||
    fail "apt-get not found: install redis-server by hand (any Redis >= 6.2 on PATH)"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || fail "run as root (or with sudo): apt-get install $PACKAGE"
    sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
log="$(mktemp -t install_redis.XXXXXX)"
trap 'rm -f "$log"' EXIT
apt() {
    "${sudo[@]}" apt-get -qq -o Dpkg::Use-Pty=0 "$@" >>"$log" 2>&1 || {
        cat "$log" >&2
        fail "apt-get $1 failed (see above)"
    }
}
known() {
    [[ -n "$(apt-cache policy "$PACKAGE" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)"')" ]]
}

if ! known; then
    apt update
    known || fail "apt knows no candidate for $PACKAGE"
fi

# Keep the package's init script from starting a system server (the tests run their own):
# a temporary policy-rc.d that denies every start, when there is none already and we are root.
policy=/usr/sbin/policy-rc.d
if [[ ! -e "$policy" && "$(id -u)" -eq 0 ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f "$log" "$policy"' EXIT
fi
apt install -y --no-install-recommends "$PACKAGE"

command -v redis-server >/dev/null 2>&1 ||
    fail "apt-get install finished, but redis-server is still not on PATH"
printf 'install_redis: installed %s (%s)\n' "$PACKAGE" "$(redis-server --version | head -n1)" >&2
