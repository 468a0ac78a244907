"""Prometheus metrics, one registry per app (no process-global state for tests to reset).

Who records what:
    app/web/sse.py, routers     requests by endpoint and outcome, open streams, client disconnects
    app/chat/generation.py  time to first token, inter-token latency, tokens out, retrieval latency
    app/llm/                upstream errors by kind, upstream aborts, outstanding requests and
                            health per replica, tokens by endpoint and client
    app/feedback/metrics.py the feedback jobs' own, registered in the same registry
plus the event loop's task count (a leak shows up there first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["UPSTREAM_ERROR_KINDS", "Metrics"]

# The ``kind`` label of gateway_upstream_errors_total.
UPSTREAM_ERROR_KINDS = (
    "connect",  # refused, reset or unreachable before any answer
    "timeout",  # read or total timeout
    "status",  # a non-200 answer (429/503 included)
    "inband",  # an {"error": ...} event inside the stream
    "malformed",  # an event we cannot parse
    "cut",  # the stream ended before [DONE]
    "invalid_answer",  # the stream finished but the answer is not the schema
)

# Latency buckets in seconds: sub-millisecond gateway work up to slow CPU generations.
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_GAPS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 10)


class _LoopTasks(Collector):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def collect(self) -> Iterable[GaugeMetricFamily]:
        tasks = len(asyncio.all_tasks(self._loop))
        yield GaugeMetricFamily("gateway_event_loop_tasks", "asyncio tasks alive now", tasks)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        # --- requests (routers, app/web/sse.py) ---
        self.requests = Counter(
            "gateway_requests",
            "finished recommendation requests by endpoint (GET streams, POST json) and outcome "
            "(close, an error status, or disconnected)",
            ["endpoint", "outcome"],
            registry=r,
        )
        self.open_streams = Gauge("gateway_open_streams", "SSE streams open now", registry=r)
        self.client_disconnects = Counter(
            "gateway_client_disconnects",
            "requests whose client left before the terminal event",
            registry=r,
        )
        # --- generation (app/chat/generation.py) ---
        self.ttft = Histogram(
            "gateway_time_to_first_token_seconds",
            "request start to the first display text sent",
            buckets=_LATENCY,
            registry=r,
        )
        self.itl = Histogram(
            "gateway_inter_token_latency_seconds",
            "gap between consecutive upstream text chunks",
            buckets=_GAPS,
            registry=r,
        )
        self.tokens_out = Counter(
            "gateway_tokens_out",
            "upstream text chunks streamed (one token each; vLLM may pack several under load)",
            registry=r,
        )
        self.retrieval = Histogram(
            "gateway_retrieval_seconds",
            "time to embed and search one query (failures included)",
            buckets=_LATENCY,
            registry=r,
        )
        self.intents = Counter(
            "gateway_intents",
            "free-text messages by what the intent step decided they ask for",
            ["kind"],
            registry=r,
        )
        self.lexical_refusals = Counter(
            "gateway_lexical_refusals",
            "turns read by their words as off-topic, by what their embedding then said: "
            "confirmed, overturned (answered), or unconfirmed (embedding model too busy)",
            ["outcome"],
            registry=r,
        )
        self.lexical_turns = Counter(
            "gateway_lexical_turns",
            "free-text turns read by their words (lexical intent, sparse-only search) because "
            "EMBEDDING_QUEUE_MAX queries were already waiting for the embedding model",
            registry=r,
        )
        self.answers_salvaged = Counter(
            "gateway_answers_salvaged",
            "answers ended early and closed with what was complete plus catalogue items, by "
            "reason: loop (a sentence about to be shown a third time), truncated (max_tokens)",
            ["reason"],
            registry=r,
        )
        # --- tokens (app/llm/client.py, every upstream request, cancelled ones too) ---
        self.llm_tokens = Counter(
            "gateway_llm_tokens",
            "LLM tokens by endpoint (base-info, free-text, their -json, feedback), client (the "
            "API key's name, page, or anonymous) and type (input, output); vLLM's usage, or "
            "for a request closed before it came, the content events seen as output",
            ["endpoint", "client", "type"],
            registry=r,
        )
        self.llm_usage_unreported = Counter(
            "gateway_llm_usage_unreported",
            "LLM requests closed before vLLM reported their usage (client left, loop, timeout, "
            "failure): their output counted from the stream, their input as 0",
            ["endpoint"],
            registry=r,
        )
        # --- upstream (app/llm/) ---
        self.upstream_errors = Counter(
            "gateway_upstream_errors",
            "upstream failures by kind: " + ", ".join(UPSTREAM_ERROR_KINDS),
            ["kind"],
            registry=r,
        )
        self.upstream_aborts = Counter(
            "gateway_upstream_aborts",
            "upstream generations we closed before [DONE] (client left, shutdown, timeout)",
            registry=r,
        )
        self.upstream_outstanding = Gauge(
            "gateway_upstream_outstanding",
            "requests in flight per upstream replica",
            ["upstream"],
            registry=r,
        )
        self.upstream_healthy = Gauge(
            "gateway_upstream_healthy",
            "1 when the replica passed its last health check, else 0",
            ["upstream"],
            registry=r,
        )
        self.upstream_affinity = Counter(
            "gateway_upstream_affinity",
            "chat turns by where session affinity sent them (several replicas only): home, "
            "busy (gave way to the least loaded), moved (its replica was down)",
            ["outcome"],
            registry=r,
        )

    def watch_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.registry.register(_LoopTasks(loop))

    def render(self) -> bytes:
        return generate_latest(self.registry)
