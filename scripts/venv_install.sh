#!/usr/bin/env bash
# Install packages into a virtual environment with uv, on pip's own configuration; pip when uv
# cannot.
#
#   scripts/venv_install.sh VENV [--quiet] [--extra-index-url URL] [-e PATH[EXTRAS]] SPEC...
#
# Why uv: on this 2-core machine pip took 187 s to install the gateway and its test tools into a
# new venv, uv a fraction of that with the same releases (bench/install_bench.py). Both
# installers of the suite's critical path (scripts/test.sh, scripts/install_vllm.sh) use it.
#
# uv does not read pip's configuration, so this script carries it over: the sources pip is
# configured with (find-links, index-url, extra-index-url: a machine's local wheels and
# mirrors), its constraint files (a machine's caps, e.g. on torch), its certificate bundle and
# timeout. Several indexes are searched as pip does: the best version across all of them.
#
# uv is installed into VENV itself (one small wheel), so nothing outside the venv changes. When
# that or uv's install fails, the same arguments go to VENV's pip, which reads its own
# configuration (a failure of both fails the script).
set -euo pipefail

venv="${1:?usage: venv_install.sh VENV [pip install arguments]}"
shift
py="$venv/bin/python"
log() { printf '[venv_install] %s\n' "$*" >&2; }

# pip's value for KEY ('find-links', ...) in $listing (`pip config list`, read by with_uv): the
# environment's over the files', empty when unset.
pip_setting() {
    { grep -E "^:env:\.$1=" <<<"$listing" || grep -E "^[a-z]+\.$1=" <<<"$listing" || true; } \
        | tail -n 1 | sed -E "s/^[^=]*='?//; s/'$//"
}

with_uv() {
    if [[ ! -x "$venv/bin/uv" ]]; then
        "$py" -m pip install -qq --disable-pip-version-check "uv>=0.9,<1" || return 1
    fi
    listing="$("$py" -m pip config list 2>/dev/null || true)"
    # Compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine's
    # default), nothing is compiled later, and every process would compile what it imports
    # (the suite's pytest took 923 s instead of 702 s).
    local args=(--python "$py" --index-strategy unsafe-best-match --compile-bytecode) value item
    value="$(pip_setting index-url)"
    [[ -z "$value" ]] || args+=(--index-url "$value")
    for key in extra-index-url find-links constraint; do
        value="$(pip_setting "$key")"
        for item in $value; do args+=("--$key" "$item"); done
    done
    value="$(pip_setting cert)"
    [[ -z "$value" || -n "${SSL_CERT_FILE:-}" ]] || export SSL_CERT_FILE="$value"
    value="$(pip_setting default-timeout)"
    [[ -n "$value" ]] || value="$(pip_setting timeout)"
    [[ -z "$value" ]] || export UV_HTTP_TIMEOUT="${UV_HTTP_TIMEOUT:-${value%%.*}}"
    "$venv/bin/uv" pip install "${args[@]}" "$@"
}

if ! with_uv "$@"; then
    log "uv could not install into $venv; installing with pip instead"
    "$py" -m pip install --disable-pip-version-check "$@"
fi
