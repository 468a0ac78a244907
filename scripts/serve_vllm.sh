#!/usr/bin/env bash
# Start the vLLM OpenAI-compatible server the gateway talks to (default port 8800).
#
#   scripts/serve_vllm.sh                      # foreground (exec): Ctrl-C / SIGTERM stops it
#   scripts/serve_vllm.sh --background         # start, wait for /health, print log and PID
#   scripts/serve_vllm.sh [--background] -- --seed 1   # extra vLLM arguments after --
#
# Environment (all optional):
#   MODEL                   path or hub name; unset: the offline default model,
#                           Qwen2.5-Coder-0.5B-Instruct (fetched and converted once by
#                           scripts/fetch_default_model.sh; MAX_MODEL_LEN then defaults to 4096);
#                           MODEL=tiny: a tiny random Qwen2 built locally into
#                           $HOME/.cache/eco-gateway/tiny-qwen2 (answers are noise; for tests)
#   SERVED_MODEL_NAME       eco-llm          HOST  127.0.0.1        PORT  8800
#   MAX_MODEL_LEN           2048 (4096 for the default model)   GPU_MEMORY_UTILIZATION 0.9 (GPU only)
#   MAX_NUM_SEQS            passed when set  VLLM_EXTRA_ARGS        extra flags (word-split)
#   DTYPE                   passed when set; unset on a CPU without native bf16 (no avx512_bf16
#                           or amx_bf16 in CPUINFO, default /proc/cpuinfo): float32, where
#                           bf16 is emulated (bench/README.md "Twenty-third pass")
#   VLLM_VENV               $HOME/.cache/eco-gateway/vllm-venv (installed by
#                           scripts/install_vllm.sh when missing)
#   VLLM_DEVICE             auto|cpu|gpu (auto: gpu when nvidia-smi works)
#   VLLM_CPU_KVCACHE_SPACE  KV cache GiB on CPU, default 1
#   VLLM_CPU_NUM_OF_RESERVED_CPU  cores vLLM keeps out of its compute; unset (with
#                           VLLM_CPU_OMP_THREADS_BIND unset) on a CPU of CPUS <= 2 cores
#                           (default: nproc): 0, every core computes (bench/README.md
#                           "Twenty-fourth pass"); vLLM's default keeps one
#   KV_BLOCK_SIZE           KV cache block in tokens, the prefix cache's unit: 32 on CPU (the
#                           CPU build's own default, 128, recomputes up to 127 tokens of every
#                           cached prefix); vLLM's own default on GPU
#   VLLM_CACHE_ROOT         default: a per-user folder under ${TMPDIR:-/tmp}
#   LOG_DIR                 --background log/pid folder, default /tmp
#   PID_FILE                --background: where the server's PID is written as soon as it
#                           starts (default LOG_DIR/vllm-PORT.pid)
#   HEALTH_TIMEOUT          --background wait for /health in seconds, default 300
#   PREFLIGHT               1: run `python -m preflight` on a local MODEL first; 0 skips
# On CPU the server runs with --enforce-eager (starts in ~30 s instead of compiling).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[serve_vllm] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

background=0
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --background|-b) background=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        --) shift; extra+=("$@"); break ;;
        *) extra+=("$1"); shift ;;
    esac
done

export VLLM_VENV="${VLLM_VENV:-$HOME/.cache/eco-gateway/vllm-venv}"
SERVED_MODEL_NAME="${SERVED_MODEL_NAME:-eco-llm}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8800}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-2048}"
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.9}"
LOG_DIR="${LOG_DIR:-/tmp}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-300}"
VLLM_DEVICE="${VLLM_DEVICE:-auto}"

case "$VLLM_DEVICE" in
    auto) if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
              device=gpu; else device=cpu; fi ;;
    cpu|gpu) device="$VLLM_DEVICE" ;;
    *) die "VLLM_DEVICE must be auto, cpu or gpu (got '$VLLM_DEVICE')" ;;
esac
export VLLM_DEVICE="$device"

py="$VLLM_VENV/bin/python"
if [[ ! -x "$py" || ! -f "$VLLM_VENV/.eco-gateway-vllm-installed" ]]; then
    log "no complete vLLM venv at $VLLM_VENV: running scripts/install_vllm.sh"
    "$here/install_vllm.sh" >/dev/null
fi

if [[ -n "${MODEL:-}" && ( "$MODEL" == /* || "$MODEL" == .* || "$MODEL" == ~* ) && ! -d "$MODEL" ]]; then
    die "MODEL=$MODEL is not a folder (a hub name has the form org/name)"
fi
if [[ "${MODEL:-}" == tiny ]]; then
    MODEL="$HOME/.cache/eco-gateway/tiny-qwen2"
    log "MODEL=tiny: serving the tiny random test model $MODEL (answers are noise)"
    "$py" "$here/make_tiny_model.py" "$MODEL" >/dev/null
elif [[ -z "${MODEL:-}" ]]; then
    log "MODEL not set: serving the default model Qwen2.5-Coder-0.5B-Instruct (MODEL=tiny: test model)"
    MODEL="$("$here/fetch_default_model.sh")" || die "could not fetch the default model"
    # 4096 unless MAX_MODEL_LEN came from the environment (an inherited variable is exported; the
    # 2048 default above is not). KV cache per token: 24 layers x 2 KV heads x 64 x 2 (K, V) x
    # 2 bytes = 12 KiB, so the default 1 GiB VLLM_CPU_KVCACHE_SPACE holds ~87k tokens.
    if [[ "$(declare -p MAX_MODEL_LEN)" != "declare -x"* ]]; then
        MAX_MODEL_LEN=4096
    fi
fi

args=(
    --model "$MODEL"
    --served-model-name "$SERVED_MODEL_NAME"
    --host "$HOST"
    --port "$PORT"
    --max-model-len "$MAX_MODEL_LEN"
    # Every chat request begins with the same system prompt and worked example: their KV cache
    # is reused (the CPU build supports it; said here so that no default can turn it off).
    --enable-prefix-caching
    # Structured output without free whitespace: the model's JSON is written compactly, the
    # fewest tokens for the same answer (bench/README.md "Answers").
    --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}'
)
if [[ "$device" == gpu ]]; then
    args+=(--gpu-memory-utilization "$GPU_MEMORY_UTILIZATION")
else
    args+=(--enforce-eager)
    KV_BLOCK_SIZE="${KV_BLOCK_SIZE:-32}"  # bench/README.md "Session affinity on two replicas"
    export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
    export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-${TMPDIR:-/tmp}/eco-gateway-vllm-cache-$(id -u)}"
    mkdir -p "$VLLM_CACHE_ROOT"
    # A 16-bit checkpoint (vLLM's `auto` keeps bf16) is emulated on a CPU without native bf16:
    # on an AVX2-only CPU float32 reads a new prompt about 5 times faster and answers four at
    # once in 25 s instead of 60 (bench/README.md "Twenty-third pass").
    if [[ -z "${DTYPE:-}" ]] && ! grep -qwE 'avx512_bf16|amx_bf16' "${CPUINFO:-/proc/cpuinfo}" 2>/dev/null; then
        DTYPE=float32
        log "no native bf16 on this CPU (avx512_bf16, amx_bf16): serving in float32 (DTYPE)"
    fi
    # vLLM keeps a core for its scheduler by default: on two cores that halves the compute.
    # There its threads compute on every core (the scheduler, the frontend and the gateway
    # mostly wait on I/O): four new messages at once close in 6 s instead of 11
    # (bench/README.md "Twenty-fourth pass"). Either of vLLM's own settings, when set, wins.
    cores="${CPUS:-$(nproc)}"
    if [[ -z "${VLLM_CPU_NUM_OF_RESERVED_CPU:-}${VLLM_CPU_OMP_THREADS_BIND:-}" ]] && (( cores <= 2 )); then
        export VLLM_CPU_NUM_OF_RESERVED_CPU=0
        log "$cores cores: vLLM computes on all of them (VLLM_CPU_NUM_OF_RESERVED_CPU=0)"
    fi
fi
[[ -n "${KV_BLOCK_SIZE:-}" ]] && args+=(--block-size "$KV_BLOCK_SIZE")
[[ -n "${MAX_NUM_SEQS:-}" ]] && args+=(--max-num-seqs "$MAX_NUM_SEQS")
[[ -n "${DTYPE:-}" ]] && args+=(--dtype "$DTYPE")
if [[ -n "${VLLM_EXTRA_ARGS:-}" ]]; then
    read -r -a more <<<"$VLLM_EXTRA_ARGS"
    args+=("${more[@]}")
fi
args+=("${extra[@]}")

cmd=("$py" -m vllm.entrypoints.openai.api_server "${args[@]}")
health_host="$HOST"
[[ "$health_host" == 0.0.0.0 || "$health_host" == "::" ]] && health_host=127.0.0.1
health_url="http://$health_host:$PORT/health"

healthy() { curl -fsS -m 2 -o /dev/null "$health_url" 2>/dev/null; }

if healthy; then
    die "something already answers $health_url; stop it or choose another PORT"
fi

# Preflight: catch what keeps vLLM from starting (unmerged LoRA, config/weights/tokenizer
# mismatches, missing tokenizer files, Gemma-2 without FlashInfer, a KV cache that cannot
# fit) in a second, with the fix, instead of minutes into a load. Local folders only.
if [[ -d "$MODEL" && "${PREFLIGHT:-1}" != 0 ]]; then
    preflight=(--max-model-len "$MAX_MODEL_LEN")
    [[ -n "${MAX_NUM_SEQS:-}" ]] && preflight+=(--max-num-seqs "$MAX_NUM_SEQS")
    [[ -n "${DTYPE:-}" ]] && preflight+=(--dtype "$DTYPE")
    if [[ "$device" == gpu ]]; then
        preflight+=(--gpu-memory-utilization "$GPU_MEMORY_UTILIZATION")
    else
        preflight+=(--cpu-kvcache-gib "$VLLM_CPU_KVCACHE_SPACE")
    fi
    log "preflight: checking $MODEL (PREFLIGHT=0 skips)"
    (cd "$here/.." && "$py" -m preflight "$MODEL" "${preflight[@]}") >&2 \
        || die "preflight found a problem with $MODEL (the fix is printed above)"
fi

log "device=$device model=$MODEL name=$SERVED_MODEL_NAME on $HOST:$PORT"
if [[ $background -eq 0 ]]; then
    log "exec: ${cmd[*]}"
    exec "${cmd[@]}"
fi

mkdir -p "$LOG_DIR"
logfile="$LOG_DIR/vllm-$PORT.log"
pidfile="${PID_FILE:-$LOG_DIR/vllm-$PORT.pid}"
log "starting in the background; log: $logfile"
# setsid: own session and process group, so `kill -- -PID` stops the API server and its
# engine-core and worker children together, and the server outlives this script.
setsid "${cmd[@]}" >"$logfile" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$pidfile"

start=$SECONDS
printf '[serve_vllm] waiting for %s ' "$health_url" >&2
while true; do
    if ! kill -0 "$pid" 2>/dev/null; then
        printf '\n' >&2
        wait "$pid" 2>/dev/null && rc=0 || rc=$?
        log "vLLM exited (status $rc) before it was healthy; last lines of $logfile:"
        tail -n 40 "$logfile" >&2 || true
        rm -f "$pidfile"
        exit 1
    fi
    if healthy; then
        printf '\n' >&2
        break
    fi
    if (( SECONDS - start >= HEALTH_TIMEOUT )); then
        printf '\n' >&2
        log "not healthy after ${HEALTH_TIMEOUT} s; stopping it. Last lines of $logfile:"
        tail -n 40 "$logfile" >&2 || true
        kill -TERM -- "-$pid" 2>/dev/null || true
        rm -f "$pidfile"
        exit 1
    fi
    printf '.' >&2
    sleep 2
done
log "healthy after $((SECONDS - start)) s: http://$health_host:$PORT/v1 (model '$SERVED_MODEL_NAME')"
log "log: $logfile"
log "pid: $pid (written to $pidfile); stop with: kill -- -$pid"
echo "$pid"
