"""The upstream client's transport, side by side: httpx-aiohttp (aiohttp's C-accelerated stack,
the default) and httpx's own (httpcore + h11), under the same ``httpx.AsyncClient``, chosen
by ``LLM_TRANSPORT``. (Our former hand-written transport, ``lean``, ran in the same run that
decided its removal; its row stays in bench/README.md and bench/results/transport.json.)

For each transport, one gateway (uvloop + httptools, as ``make run`` starts it) against the
fast scripted upstream (``bench/fast_upstream.py``: 40 chunks 50 ms apart), and at 1, 100 and
500 concurrent streams (base-info, no retrieval):

- CPU per streamed chunk: the gateway process's CPU over the phase, its idle CPU subtracted,
  divided by the content chunks that reached the client;
- added TTFT p50 / p99: the gateway's minus the upstream's own at the same concurrency
  (the same load generator straight to the upstream);
- disconnect → upstream close: a client hangs up after two events, and the scripted upstream
  times until it sees its request's connection close (median and p99 of ``--trials``).

    .venv/bin/python bench/transport_bench.py [--trials 100] [--transports aiohttp,httpx]
Writes bench/results/transport.json. The decision rule (issue 16): keep a hand-written
transport only if the library is more than 25 % worse in CPU per chunk at 500 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness as h
import overhead_bench as ob

from tests.support.disconnect import hang_up_once, upstream_close_latency
from tests.support.gateway import GatewayProcess
from tests.support.store import bundled_store_template, store_copy
from tests.upstream.scripted_openai import ScriptedUpstreamThread

TRANSPORTS = ("aiohttp", "httpx")
CONCURRENCY = (1, 100, 500)
STREAMS = {1: 20, 100: 3, 500: 2}  # per worker (concurrent stream slot)
GATEWAY_ENV = {**ob.GATEWAY_ENV, "RETRIEVAL_K": "0"}


def load_rows(transport: str, up: h.Proc, direct: dict[int, dict[str, Any]]) -> list[dict]:
    rows = []
    env = {**GATEWAY_ENV, "LLM_TRANSPORT": transport}
    with h.gateway(up.url + "/v1", env=env, loop="uvloop", http="httptools") as gw:
        for concurrency in CONCURRENCY:
            row = ob._phase("gateway", gw.port, gw, up, concurrency, STREAMS[concurrency])
            d = direct[concurrency]
            row["transport"] = transport
            row["added_ttft_ms"] = {
                q: round(h.ms(row["ttft_us"][q] - d["ttft_us"][q]), 2) for q in ("p50", "p99")
            }
            rows.append(row)
            print(
                f"{transport:<8} {concurrency:>4} streams  CPU/chunk "
                f"{row['proxy_cpu_us_per_chunk_minus_idle']:>6} µs  added TTFT p50/p99 "
                f"{row['added_ttft_ms']['p50']:>7} / {row['added_ttft_ms']['p99']:>7} ms  "
                f"outcomes {row['outcomes']}",
                flush=True,
            )
    return rows


async def disconnects(transport: str, trials: int) -> dict[str, float]:
    store = store_copy(bundled_store_template(), Path(tempfile.mkdtemp()) / "qdrant")
    env = {"LOG_LEVEL": "WARNING", "QDRANT_PATH": str(store), "LLM_TRANSPORT": transport}
    params = {"location": "산", "workType": "현장직", "category": "PLOGGING"}
    url = "/ai/chatbot/recommendation/base-info"
    with (
        ScriptedUpstreamThread() as upstream,
        GatewayProcess({**env, "LLM_BASE_URL": upstream.base_url}) as gateway,
    ):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            await client.get(url, params=params)  # warm-up
            upstream.set_scenario("slow", token_delay=0.01)
            ms = []
            for _ in range(trials):
                aborted = upstream.stats["streams_aborted_by_client"]
                closed_at = await hang_up_once(client, url, params)
                ms.append(1000 * await upstream_close_latency(upstream, aborted, closed_at))
    ms.sort()
    return {"p50": round(statistics.median(ms), 2), "p99": round(ms[int(0.99 * len(ms))], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    args = parser.parse_args()
    transports = args.transports.split(",")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    rows: list[dict[str, Any]] = []
    with h.upstream(interval=ob.INTERVAL, chunks=ob.CHUNKS) as up:
        direct = {c: ob._phase("direct", up.port, None, up, c, STREAMS[c]) for c in CONCURRENCY}
        for transport in transports:
            rows.extend(load_rows(transport, up, direct))
    closes = {}
    for transport in transports:
        closes[transport] = asyncio.run(disconnects(transport, args.trials))
        print(f"{transport:<8} disconnect -> upstream close p50/p99 {closes[transport]} ms")
    table = []
    for transport in transports:
        at = {r["concurrency"]: r for r in rows if r["transport"] == transport}
        table.append(
            {
                "transport": transport,
                **{
                    f"cpu_us_per_chunk_{c}": at[c]["proxy_cpu_us_per_chunk_minus_idle"]
                    for c in CONCURRENCY
                },
                **{f"added_ttft_ms_{c}": at[c]["added_ttft_ms"] for c in CONCURRENCY},
                "disconnect_to_upstream_close_ms": closes[transport],
            }
        )
    print("\ntransport  CPU µs/chunk at 1 / 100 / 500   added TTFT p50 ms at 1 / 100 / 500")
    for t in table:
        print(
            f"{t['transport']:<9} {t['cpu_us_per_chunk_1']:>7} {t['cpu_us_per_chunk_100']:>7}"
            f" {t['cpu_us_per_chunk_500']:>7}   "
            + " ".join(f"{t[f'added_ttft_ms_{c}']['p50']:>7}" for c in CONCURRENCY)
        )
    out = h.write_result(
        "transport",
        {"bench": "transport", **h.machine(), "started": started, "table": table, "rows": rows},
    )
    print(f"written: {out.relative_to(h.ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
