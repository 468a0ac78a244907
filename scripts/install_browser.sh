#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the browser tests (tests/browser).
#
#   scripts/install_browser.sh
#
# Debian's `chromium` and `chromium-driver` packages through apt (as root, or with sudo),
# plus `fonts-nanum` when no Korean font is installed (without one, screenshots of the chat
# page show empty boxes instead of Hangul; the tests themselves read the DOM, not pixels).
# Idempotent and quiet: exits at once when /usr/bin/chromium, /usr/bin/chromedriver and a
# Korean font exist; runs `apt-get update` only when apt does not know the packages yet.
# On failure it prints apt's output and exits non-zero.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver

fail() {
    printf 'install_browser: %s\n' "$*" >&2
    exit 1
}

has_korean_font() {
    command -v fc-list >/dev/null 2>&1 && [[ -n "$(fc-list :lang=ko family 2>/dev/null)" ]]
}

packages=()
[[ -x "$CHROMIUM" ]] || packages+=(chromium)
[[ -x "$CHROMEDRIVER" ]] || packages+=(chromium-driver)
has_korean_font || packages+=(fonts-nanum)
((${#packages[@]})) || exit 0

command -v apt-get >/dev/null 2>&1 ||
    fail "apt-get not found: install ${packages[*]} by hand ($CHROMIUM, $CHROMEDRIVER)"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || fail "run as root (or with sudo): apt-get install ${packages[*]}"
    sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
log="$(mktemp -t install_browser.XXXXXX)"
trap 'rm -f "$log"' EXIT
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
apt install -y "${packages[@]}"

[[ -x "$CHROMIUM" && -x "$CHROMEDRIVER" ]] ||
    fail "apt-get install finished, but $CHROMIUM or $CHROMEDRIVER is still missing"
printf 'install_browser: installed %s\n' "${packages[*]}" >&2
