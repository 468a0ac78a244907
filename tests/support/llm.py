"""An ``LLMClient`` for tests that talk to one scripted upstream: its replica pool is built
here without its health checks (a test's upstream is up, or down on purpose)."""

from __future__ import annotations

import httpx

from app.config import Settings
from app.llm.client import LLMClient
from app.llm.upstreams import UpstreamPool
from app.metrics import Metrics


def llm_client(
    http: httpx.AsyncClient, settings: Settings, metrics: Metrics | None = None
) -> LLMClient:
    metrics = metrics if metrics is not None else Metrics()
    pool = UpstreamPool.from_settings(settings, http, metrics)
    return LLMClient(http, settings, metrics=metrics, upstreams=pool)
