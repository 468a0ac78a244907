"""Hang up on a live stream and measure how fast the upstream request is closed."""

from __future__ import annotations

import re
import time

import anyio
import httpx

from tests.upstream.scripted_openai import ScriptedUpstreamThread

_GAUGE = re.compile(r"^(gateway_open_streams|gateway_event_loop_tasks) (\S+)$", re.M)


async def hang_up_once(
    client: httpx.AsyncClient, url: str, params: dict[str, str], events_before: int = 2
) -> float:
    """Open a stream, read ``events_before`` challenge events, close; returns the close time."""
    async with client.stream("GET", url, params=params) as response:
        seen = 0
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("event: challenge"):
                seen += 1
                if seen >= events_before:
                    break
        closed_at = time.time()
        await response.aclose()
    return closed_at


async def upstream_close_latency(
    upstream: ScriptedUpstreamThread, request_count_before: int, closed_at: float
) -> float:
    """Seconds from ``closed_at`` to the upstream seeing its request's connection close."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        disconnects = upstream.stats["disconnects"]
        if upstream.stats["streams_aborted_by_client"] > request_count_before and disconnects:
            return float(disconnects[-1]["disconnect_at"]) - closed_at
        await anyio.sleep(0.002)
    raise AssertionError("the upstream never saw the disconnect")


async def gateway_gauges(client: httpx.AsyncClient) -> dict[str, float]:
    text = (await client.get("/metrics")).text
    return {name: float(value) for name, value in _GAUGE.findall(text)}
