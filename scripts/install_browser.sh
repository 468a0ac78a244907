#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the browser tests (tests/browser).
#
#   scripts/install_browser.sh
#
# Debian's `chromium` and `chromium-driver` packages, through apt (needs root, or sudo).
# Idempotent: exits at once when /usr/bin/chromium and /usr/bin/chromedriver exist, and runs
# `apt-get update` only when the package lists do not know the packages yet.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver
PACKAGES=(chromium chromium-driver)

fail() {
    printf 'install_browser: %s\n' "$*" >&2
    exit 1
}

if [[ -x "$CHROMIUM" && -x "$CHROMEDRIVER" ]]; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
    fail "apt-get not found: install Chromium and chromedriver by hand ($CHROMIUM, $CHROMEDRIVER)"

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || fail "run as root (or install sudo) to apt-get install ${PACKAGES[*]}"
    SUDO=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
apt_quiet=(-qq -o Dpkg::Use-Pty=0)

known() {
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        apt-cache show "$pkg" >/dev/null 2>&1 || return 1
    done
}

if ! known; then
    "${SUDO[@]}" apt-get "${apt_quiet[@]}" update >/dev/null ||
        fail "apt-get update failed (no network or no package mirror?)"
    known || fail "apt has no package named ${PACKAGES[*]} on this system"
fi

"${SUDO[@]}" apt-get "${apt_quiet[@]}" install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null ||
    fail "apt-get install ${PACKAGES[*]} failed"

[[ -x "$CHROMIUM" && -x "$CHROMEDRIVER" ]] ||
    fail "installed, but $CHROMIUM or $CHROMEDRIVER is still missing"
printf 'install_browser: %s\n' "$("$CHROMIUM" --version 2>/dev/null || echo chromium)" >&2
