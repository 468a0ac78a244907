#!/usr/bin/env bash
# Install LiteLLM's proxy into its own virtual environment, outside the repository. Only the
# overhead benchmark uses it (bench/overhead_bench.py compares our gateway with it).
#
#   scripts/install_litellm.sh            # install (or confirm) the venv
#   scripts/install_litellm.sh --force    # wipe it and install again
#
# Where: ${LITELLM_VENV:-$HOME/.cache/eco-gateway/litellm-venv}, a cache outside the repo that
# fresh clones on the same machine reuse. A marker file holding the version is written last;
# when it is missing or names another version, the venv is rebuilt. Otherwise the script exits
# at once. Also installs uvloop (LiteLLM's proxy runs uvicorn with it when present).
#
# Environment: LITELLM_VENV, LITELLM_PYTHON (interpreter, default python3),
# LITELLM_VERSION (1.102.4: the newest whose pins resolve from the reachable PyPI). Progress goes to stderr; the venv path is printed on stdout.
set -euo pipefail

LITELLM_VENV="${LITELLM_VENV:-$HOME/.cache/eco-gateway/litellm-venv}"
LITELLM_PYTHON="${LITELLM_PYTHON:-python3}"
LITELLM_VERSION="${LITELLM_VERSION:-1.102.4}"
MARKER="$LITELLM_VENV/.eco-gateway-litellm-installed"

NAME=install_litellm
# shellcheck source=scripts/venv_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv_cache.sh"
parse_args "$@"

py_version="$("$LITELLM_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    || die "cannot run $LITELLM_PYTHON (set LITELLM_PYTHON to a python >= 3.9)"
wanted="python=$py_version litellm[proxy]==$LITELLM_VERSION"

lock_venv "$LITELLM_VENV"

venv_ready "$LITELLM_VENV" "$MARKER" "$wanted" LiteLLM

if [[ -e "$LITELLM_VENV" ]]; then
    log "venv missing its marker or holding another version: rebuilding it"
    rm -rf "$LITELLM_VENV"
fi

start=$SECONDS
log "creating venv $LITELLM_VENV with $LITELLM_PYTHON ($py_version), target: $wanted"
"$LITELLM_PYTHON" -m venv "$LITELLM_VENV"
"$LITELLM_VENV/bin/python" -m pip install --disable-pip-version-check --quiet \
    "litellm[proxy]==$LITELLM_VERSION" uvloop >&2

log "checking the install..."
LITELLM_LOCAL_MODEL_COST_MAP=True "$LITELLM_VENV/bin/python" -c \
    'import litellm, litellm.proxy.proxy_server; print("ok: litellm", litellm.__version__ if hasattr(litellm, "__version__") else "")' >&2
[[ -x "$LITELLM_VENV/bin/litellm" ]] || die "no litellm command in $LITELLM_VENV/bin"

echo "$wanted" > "$MARKER"
log "done in $((SECONDS - start)) s: $LITELLM_VENV ($(du -sh "$LITELLM_VENV" 2>/dev/null | cut -f1))"
echo "$LITELLM_VENV"
