"""One callback attempt: ``POST FEEDBACK_CALLBACK_URL`` with ``{memberId, content, jobId}``.

The backend's answer decides what happens next (the queue backend does the waiting):

    2xx                                     delivered
    5xx, 408, 429, timeout, connection      retry after ``next_delay(attempt)``: exponential
                                            backoff with full jitter (saq's), capped
    other 4xx (and 3xx: a misconfigured URL) dead letter at once: a retry cannot fix it
    FEEDBACK_DELIVERY_ATTEMPTS used up      dead letter

A dead letter is logged at ERROR (job id, member id, why) and counted in
``gateway_feedback_dead_letters_total{reason}``; the job's record keeps ``delivery:
dead_letter`` so polling shows it. The body also goes as ``Idempotency-Key: <jobId>``: a
result delivered but not yet marked so when a process died is sent again after the restart,
and the backend can tell.

Its own httpx client: the callback is another service, and must never receive the LLM API key
that the upstream client sends with every request.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import httpx
from saq.utils import exponential_backoff

from app.config import FeedbackSettings
from app.feedback.metrics import FeedbackMetrics
from app.feedback.models import FeedbackResult
from app.tracing import carrier

__all__ = ["CallbackSender", "Step"]

log = logging.getLogger(__name__)


class Step(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead_letter"


@dataclass(frozen=True, slots=True)
class Attempt:
    step: Step
    why: str


class CallbackSender:
    def __init__(self, settings: FeedbackSettings, metrics: FeedbackMetrics) -> None:
        self._settings = settings
        self._metrics = metrics
        headers = {"content-type": "application/json"}
        if settings.feedback_callback_token is not None:
            token = settings.feedback_callback_token.get_secret_value()
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            headers=headers, timeout=settings.feedback_callback_timeout, trust_env=False
        )

    @property
    def configured(self) -> bool:
        return self._settings.feedback_callback_url is not None

    async def aclose(self) -> None:
        await self._http.aclose()

    def next_delay(self, attempt: int) -> float:
        s = self._settings
        return exponential_backoff(
            attempt, s.feedback_delivery_backoff_seconds, s.feedback_delivery_backoff_max_seconds
        )

    async def send(self, result: FeedbackResult, attempt: int) -> Step:
        url = self._settings.feedback_callback_url
        assert url is not None
        outcome = await self._post(url, result)
        step = outcome.step
        if step is Step.RETRY and attempt >= self._settings.feedback_delivery_attempts:
            step = Step.DEAD
            reason = "exhausted"
        else:
            reason = "client_error"
        if step is Step.DEAD:
            self._metrics.dead_letters.labels(reason).inc()
            log.error(
                "feedback %s for member %s: dead letter after %d attempt(s) (%s: %s)",
                result.jobId,
                result.memberId,
                attempt,
                reason,
                outcome.why,
            )
        elif step is Step.RETRY:
            log.warning(
                "feedback %s: callback attempt %d failed (%s), will retry",
                result.jobId,
                attempt,
                outcome.why,
            )
        self._metrics.deliveries.labels(step.value).inc()
        return step

    async def _post(self, url: str, result: FeedbackResult) -> Attempt:
        try:
            response = await self._http.post(
                url,
                content=result.model_dump_json(),
                # carrier(): the job's trace goes on to the backend (its "feedback deliver" span).
                headers={"idempotency-key": result.jobId, **carrier()},
            )
        except httpx.TimeoutException as exc:
            return Attempt(Step.RETRY, f"timeout ({type(exc).__name__})")
        except httpx.HTTPError as exc:
            return Attempt(Step.RETRY, f"connection ({type(exc).__name__})")
        status = response.status_code
        if 200 <= status < 300:
            return Attempt(Step.DELIVERED, str(status))
        if status >= 500 or status in (408, 429):
            return Attempt(Step.RETRY, f"status {status}")
        return Attempt(Step.DEAD, f"status {status}")
