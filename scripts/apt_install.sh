#!/usr/bin/env bash
# Install Debian packages quietly: shared by the install_*.sh scripts.
#
#   scripts/apt_install.sh [--no-recommends] [--no-service-start] PACKAGE...
#
# As root, or with sudo. Runs `apt-get update` only when apt knows no candidate for one of
# the packages yet. --no-service-start keeps a package's init script from starting a system
# service (a temporary policy-rc.d that denies starts, when there is none already and we are
# root). Quiet unless it fails: then it prints apt's output and exits non-zero.
set -euo pipefail

fail() {
    printf 'apt_install: %s\n' "$*" >&2
    exit 1
}

install_args=(-y)
no_service=0
while [[ $# -gt 0 && "$1" == --* ]]; do
    case "$1" in
        --no-recommends) install_args+=(--no-install-recommends) ;;
        --no-service-start) no_service=1 ;;
        *) fail "unknown option $1" ;;
    esac
    shift
done
packages=("$@")
((${#packages[@]})) || fail "no package named"

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install ${packages[*]} by hand"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || fail "run as root (or with sudo): apt-get install ${packages[*]}"
    sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
log="$(mktemp -t apt_install.XXXXXX)"
cleanup=("$log")
trap 'rm -f "${cleanup[@]}"' EXIT
apt() {
    "${sudo[@]}" apt-get -qq -o Dpkg::Use-Pty=0 "$@" >>"$log" 2>&1 || {
        cat "$log" >&2
        fail "apt-get $1 failed (see above)"
    }
}
known() {
    local pkg
    for pkg in "${packages[@]}"; do
        [[ -n "$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)"')" ]] ||
            return 1
    done
}

if ! known; then
    apt update
    known || fail "apt knows no candidate for one of: ${packages[*]}"
fi
policy=/usr/sbin/policy-rc.d
if ((no_service)) && [[ ! -e "$policy" && "$(id -u)" -eq 0 ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    cleanup+=("$policy")
fi
apt install "${install_args[@]}" "${packages[@]}"
