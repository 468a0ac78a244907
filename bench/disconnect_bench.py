"""Client hang-up -> upstream close, over many trials, and what is left afterwards.

Starts the scripted upstream (slow tokens) and the real gateway under uvicorn, then per
trial: open a base-info stream, read two events, hang up, and time until the upstream sees
its connection close. At the end, compares the gateway's open streams and event-loop tasks
and the upstream's open connections with the start.

    .venv/bin/python bench/disconnect_bench.py [--trials 1000] [--concurrency 1]
Writes bench/results/disconnect.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.disconnect import (  # noqa: E402
    gateway_gauges,
    hang_up_once,
    upstream_close_latency,
)
from tests.support.gateway import GatewayProcess  # noqa: E402
from tests.support.store import bundled_store_template, store_copy  # noqa: E402
from tests.upstream.scripted_openai import ScriptedUpstreamThread  # noqa: E402

PARAMS = {"location": "산", "workType": "현장직", "category": "PLOGGING"}
URL = "/ai/chatbot/recommendation/base-info"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _run(trials: int) -> dict[str, object]:
    store = store_copy(bundled_store_template(), Path(tempfile.mkdtemp()) / "qdrant")
    env = {"LOG_LEVEL": "WARNING", "QDRANT_PATH": str(store)}
    with (
        ScriptedUpstreamThread() as upstream,
        GatewayProcess({**env, "LLM_BASE_URL": upstream.base_url}) as gateway,
    ):
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            upstream.set_scenario("ok")
            await client.get(URL, params=PARAMS)  # warm up: model discovery, pools
            before = await gateway_gauges(client)
            connections_before = upstream.stats["open_connections"]
            upstream.set_scenario("slow", token_delay=0.01)
            latencies: list[float] = []
            started = time.monotonic()
            for i in range(trials):
                aborted = upstream.stats["streams_aborted_by_client"]
                closed_at = await hang_up_once(client, URL, PARAMS)
                latencies.append(await upstream_close_latency(upstream, aborted, closed_at))
                if (i + 1) % 100 == 0:
                    print(f"  {i + 1}/{trials} hang-ups", file=sys.stderr)
            wall = time.monotonic() - started
            await anyio.sleep(0.5)
            after = await gateway_gauges(client)
            stats = upstream.stats
    ms = [x * 1000 for x in latencies]
    return {
        "trials": trials,
        "hangup_to_upstream_close_ms": {
            "p50": statistics.median(ms),
            "p90": _pct(ms, 0.90),
            "p99": _pct(ms, 0.99),
            "max": max(ms),
        },
        "wall_seconds": wall,
        "upstream_aborted_streams": stats["streams_aborted_by_client"],
        "upstream_active_streams_after": stats["active_streams"],
        "upstream_open_connections": {
            "before": connections_before,
            "after": stats["open_connections"],
        },
        "gateway_open_streams": {
            "before": before["gateway_open_streams"],
            "after": after["gateway_open_streams"],
        },
        "gateway_event_loop_tasks": {
            "before": before["gateway_event_loop_tasks"],
            "after": after["gateway_event_loop_tasks"],
        },
        "machine": f"{platform.machine()} {platform.python_version()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    result = anyio.run(_run, args.trials)
    lat = result["hangup_to_upstream_close_ms"]
    assert isinstance(lat, dict)
    print(f"\nclient hang-up -> upstream connection closed, {result['trials']} trials")
    print(f"{'p50 ms':>10} {'p90 ms':>10} {'p99 ms':>10} {'max ms':>10}")
    print(f"{lat['p50']:>10.2f} {lat['p90']:>10.2f} {lat['p99']:>10.2f} {lat['max']:>10.2f}")
    print("\nleft over            before   after")
    for key in ("gateway_open_streams", "gateway_event_loop_tasks", "upstream_open_connections"):
        pair = result[key]
        assert isinstance(pair, dict)
        print(f"{key:<26} {pair['before']:>6} {pair['after']:>7}")
    print(f"upstream active streams after: {result['upstream_active_streams_after']}")
    out = ROOT / "bench" / "results" / "disconnect.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
