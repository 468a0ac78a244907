"""Prometheus metrics, one registry per app (no process-global state for tests to reset).

A first set: streams open now, streams by endpoint and outcome, client disconnects, and the
event loop's task count (a leak shows up there first). Latency histograms come later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["Metrics"]


class _LoopTasks(Collector):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def collect(self) -> Iterable[GaugeMetricFamily]:
        tasks = len(asyncio.all_tasks(self._loop))
        yield GaugeMetricFamily("gateway_event_loop_tasks", "asyncio tasks alive now", tasks)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.open_streams = Gauge(
            "gateway_open_streams", "SSE streams open now", registry=self.registry
        )
        self.streams = Counter(
            "gateway_streams",
            "finished streams by endpoint and outcome",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.client_disconnects = Counter(
            "gateway_client_disconnects",
            "streams the client left before the terminal event",
            registry=self.registry,
        )

    def watch_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.registry.register(_LoopTasks(loop))

    def render(self) -> bytes:
        return generate_latest(self.registry)
