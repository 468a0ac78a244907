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

# --no-service-start: the tests run their own server; none is needed as a system service.
"$(dirname "$0")/apt_install.sh" --no-recommends --no-service-start "$PACKAGE"

command -v redis-server >/dev/null 2>&1 ||
    fail "apt-get install finished, but redis-server is still not on PATH"
printf 'install_redis: installed %s (%s)\n' "$PACKAGE" "$(redis-server --version | head -n1)" >&2
