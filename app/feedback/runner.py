"""What one job does, whichever queue runs it: generate, publish once, deliver.

Both queue backends call the same two steps:

``generate(job_id)``: summarise the member's week (code), write the text (model, or the
fallback), store it in the job's record (``done``), publish it on the results stream once
(a claim guards against a second publication when a crashed job runs again), and say whether a
callback is due. A job that is already ``done`` (it crashed after storing) is not generated
again: the same text goes on to publication and delivery.

``deliver(job_id, attempt)``: one callback attempt; None when the job's delivery is over
(delivered or dead letter), else the seconds to wait before the next attempt.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from app.feedback.delivery import CallbackSender, Step
from app.feedback.generator import FeedbackGenerator
from app.feedback.models import FeedbackResult, JobRecord
from app.feedback.records import JobStore, ResultLog
from app.feedback.summary import summarize
from app.tracing import context_of

__all__ = ["FeedbackRunner"]

log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)  # a proxy: app/tracing.py


class FeedbackRunner:
    def __init__(
        self,
        *,
        store: JobStore,
        results: ResultLog,
        generator: FeedbackGenerator,
        sender: CallbackSender,
    ) -> None:
        self.store = store
        self.results = results
        self._generator = generator
        self._sender = sender

    async def generate(self, job_id: str) -> bool:
        """Run the job; True when a callback delivery is to be scheduled."""
        record = await self.store.get(job_id)
        if record is None:
            log.warning("feedback %s: no record (expired?); job dropped", job_id)
            return False
        if record.status != "done":
            record.status = "running"
            await self.store.put(record)
            summary = summarize(record.request, record.acceptedAt)
            with _tracer.start_as_current_span(
                "feedback generate",
                context=context_of(record.trace),  # the accepting request's trace
                kind=SpanKind.CONSUMER,
                attributes={"gateway.feedback.job_id": job_id},
            ) as span:
                content, source = await self._generator.write(
                    summary, job_id=job_id, client=record.client
                )
                span.set_attribute("gateway.feedback.source", source)
            record.status = "done"
            record.content = content
            record.source = source
            record.finishedAt = datetime.now(UTC)
            record.delivery = "pending" if self._sender.configured else "none"
            await self.store.put(record)
            log.info("feedback %s: done (%s, %d chars)", job_id, source, len(content))
        if await self.store.claim("published", job_id):
            await self.results.append(_result(record))
        return record.delivery == "pending"

    async def fail(self, job_id: str, why: str) -> None:
        """Mark a job failed (a bug, or a record we cannot read): polling shows it."""
        record = await self.store.get(job_id)
        if record is not None and record.status != "done":
            record.status = "failed"
            record.finishedAt = datetime.now(UTC)
            await self.store.put(record)
        log.error("feedback %s: failed (%s)", job_id, why)

    async def deliver(self, job_id: str, attempt: int) -> float | None:
        record = await self.store.get(job_id)
        if record is None or record.delivery != "pending" or record.content is None:
            return None
        with _tracer.start_as_current_span(
            "feedback deliver",
            context=context_of(record.trace),
            kind=SpanKind.PRODUCER,  # the callback carries the same trace on
            attributes={"gateway.feedback.job_id": job_id, "gateway.feedback.attempt": attempt},
        ) as span:
            step = await self._sender.send(_result(record), attempt)
            span.set_attribute("gateway.feedback.step", step.value)
        record.deliveryAttempts = attempt
        if step is Step.RETRY:
            await self.store.put(record)
            return self._sender.next_delay(attempt)
        record.delivery = "delivered" if step is Step.DELIVERED else "dead_letter"
        await self.store.put(record)
        if step is Step.DEAD:
            await self.store.dead_letter(job_id)
        return None


def _result(record: JobRecord) -> FeedbackResult:
    assert record.content is not None
    return FeedbackResult(memberId=record.memberId, content=record.content, jobId=record.jobId)
