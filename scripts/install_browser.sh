#!/usr/bin/env bash
# Install headless Chromium and its WebDriver for the browser tests (tests/browser).
#
#   scripts/install_browser.sh
#
# Debian's `chromium` and `chromium-driver` packages through scripts/apt_install.sh,
# plus `fonts-nanum` when no Korean font is installed (without one, screenshots of the chat
# page show empty boxes instead of Hangul; the tests themselves read the DOM, not pixels).
# Idempotent and quiet: exits at once when /usr/bin/chromium, /usr/bin/chromedriver and a
# Korean font exist.
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

"$(dirname "$0")/apt_install.sh" "${packages[@]}"

[[ -x "$CHROMIUM" && -x "$CHROMEDRIVER" ]] ||
    fail "apt-get install finished, but $CHROMIUM or $CHROMEDRIVER is still missing"
printf 'install_browser: installed %s\n' "${packages[*]}" >&2
