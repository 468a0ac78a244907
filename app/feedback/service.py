"""The feedback job API's use case: accept a job once, look one up, read the results.

``open_feedback`` builds it for the lifespan, on Redis (saq, shared and durable) when
given it (``REDIS_URL``), else in process; the gateway runs workers too unless
``FEEDBACK_IN_PROCESS_WORKERS=false`` (then only ``python -m app.feedback.worker`` processes
run jobs).

Accepting (``submit``): a known ``Idempotency-Key`` gives its job back, whatever the queue's
state, if the request is the same (its validated fingerprint); the same key with another
request is a 422, never merged into the first job (as the IETF Idempotency-Key draft has it).
Else a full queue (``FEEDBACK_QUEUE_MAX`` jobs waiting) is a 503 with a retry hint; else a new
job id is bound to the key (atomically: two requests with one key race to one job), its record
written, and the job enqueued. The key as given here is already scoped by the web layer (per
API key; a bare request id also by the request's fingerprint).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from typing import Protocol

from prometheus_client import CollectorRegistry
from redis.exceptions import RedisError
from saq.queue.redis import RedisQueue

from app.config import FeedbackSettings
from app.domain.errors import InvalidValue, Overloaded
from app.feedback.dates import SEOUL
from app.feedback.delivery import CallbackSender
from app.feedback.generator import FeedbackGenerator
from app.feedback.metrics import FeedbackMetrics
from app.feedback.models import FeedbackRequest, JobRecord
from app.feedback.queue_memory import MemoryDispatcher
from app.feedback.queue_saq import SaqDispatcher, build_worker
from app.feedback.records import JobStore, MemoryJobStore, MemoryResultLog, ResultLog
from app.feedback.redis_records import RedisJobStore, RedisResultLog
from app.feedback.runner import FeedbackRunner
from app.llm.client import LLMClient
from app.redis_client import JOBS, RedisConnector
from app.tracing import carrier

__all__ = ["FeedbackService", "open_feedback", "open_saq_runtime"]

log = logging.getLogger(__name__)

QUEUE_FULL_MESSAGE = "피드백 요청이 많아 지금은 받을 수 없어요. 잠시 후 다시 보내 주세요."
KEY_REUSED_MESSAGE = "같은 Idempotency-Key로 다른 요청이 이미 접수되었어요. 새 키로 보내 주세요."
UNAVAILABLE_MESSAGE = "피드백 작업 저장소에 연결할 수 없어요. 잠시 후 다시 보내 주세요."
RETRY_AFTER_SECONDS = 10.0
_MAX_MEMORY_JOBS = 100_000


class _Dispatcher(Protocol):
    async def pending(self) -> int: ...

    async def enqueue(self, job_id: str) -> None: ...


class FeedbackService:
    def __init__(
        self,
        *,
        store: JobStore,
        results: ResultLog,
        dispatcher: _Dispatcher,
        settings: FeedbackSettings,
        metrics: FeedbackMetrics,
    ) -> None:
        self.store = store
        self.results = results
        self._dispatcher = dispatcher
        self._settings = settings
        self.metrics = metrics

    async def submit(
        self, request: FeedbackRequest, key: str | None, client: str = "anonymous"
    ) -> tuple[JobRecord, bool]:
        """The job for this request and whether it is new; Overloaded (503) when full,
        InvalidValue (422) when ``key`` names a job of another request. ``client`` labels the
        job's token counts; the current trace context becomes the job's parent."""
        try:
            return await self._submit(request, key, client)
        except (RedisError, OSError) as exc:
            raise Overloaded(
                f"feedback store unavailable: {exc}",
                retry_after=RETRY_AFTER_SECONDS,
                message=UNAVAILABLE_MESSAGE,
            ) from exc

    async def _submit(
        self, request: FeedbackRequest, key: str | None, client: str
    ) -> tuple[JobRecord, bool]:
        if key is not None and (known := await self._known(key, request)) is not None:
            return known, False
        if await self._dispatcher.pending() >= self._settings.feedback_queue_max:
            self.metrics.jobs.labels("queue_full").inc()
            raise self._full()
        job_id = uuid.uuid4().hex
        if key is not None and (await self.store.bind_key(key, job_id)) is not None:
            known = await self._known(key, request)  # lost the race to a twin request
            if known is not None:
                return known, False
        record = JobRecord(
            jobId=job_id,
            memberId=request.memberId,
            acceptedAt=datetime.now(SEOUL),
            request=request,
            trace=carrier(),
            client=client,
        )
        await self.store.put(record)
        try:
            await self._dispatcher.enqueue(job_id)
        except asyncio.QueueFull:
            self.metrics.jobs.labels("queue_full").inc()
            raise self._full() from None
        self.metrics.jobs.labels("accepted").inc()
        log.info("feedback %s accepted for member %s", job_id, request.memberId)
        return record, True

    async def _known(self, key: str, request: FeedbackRequest) -> JobRecord | None:
        job_id = await self.store.job_for_key(key)
        if job_id is None:
            return None
        for _ in range(20):  # a twin request may be writing the record right now
            record = await self.store.get(job_id)
            if record is not None:
                if record.request.fingerprint() != request.fingerprint():
                    self.metrics.jobs.labels("key_reused").inc()
                    raise InvalidValue(
                        ["Idempotency-Key"],
                        f"Idempotency-Key of job {job_id} reused with another request",
                        message=KEY_REUSED_MESSAGE,
                    )
                self.metrics.jobs.labels("duplicate").inc()
                return record
            await asyncio.sleep(0.01)
        return None

    def _full(self) -> Overloaded:
        return Overloaded(
            "feedback queue full", retry_after=RETRY_AFTER_SECONDS, message=QUEUE_FULL_MESSAGE
        )

    async def get(self, job_id: str) -> JobRecord | None:
        return await self.store.get(job_id)


@asynccontextmanager
async def open_saq_runtime(
    settings: FeedbackSettings, llm: LLMClient, metrics: FeedbackMetrics, redis: RedisConnector
) -> AsyncIterator[tuple[RedisQueue, FeedbackRunner, RedisJobStore, RedisResultLog]]:
    """saq's queue and the runner on Redis (the gateway's and the worker CLI's)."""
    s = settings
    async with AsyncExitStack() as stack:
        records = redis.client(JOBS)
        stack.push_async_callback(records.aclose)
        queue = RedisQueue(redis.client(JOBS), name=s.feedback_queue_name)
        stack.push_async_callback(queue.disconnect)
        sender = CallbackSender(s, metrics)
        stack.push_async_callback(sender.aclose)
        store = RedisJobStore(
            records, prefix=s.feedback_redis_prefix, ttl=s.feedback_result_ttl_seconds
        )
        results = RedisResultLog(
            records, prefix=s.feedback_redis_prefix, keep=s.feedback_results_keep
        )
        runner = FeedbackRunner(
            store=store,
            results=results,
            generator=FeedbackGenerator(llm, s, metrics),
            sender=sender,
        )
        yield queue, runner, store, results


@asynccontextmanager
async def open_feedback(
    settings: FeedbackSettings,
    llm: LLMClient,
    registry: CollectorRegistry,
    redis: RedisConnector | None,
) -> AsyncIterator[FeedbackService]:
    """The service for the gateway's lifespan, its workers running while it is open."""
    s = settings
    metrics = FeedbackMetrics(registry)
    if redis is None:
        store = MemoryJobStore(ttl=s.feedback_result_ttl_seconds, max_jobs=_MAX_MEMORY_JOBS)
        results = MemoryResultLog(s.feedback_results_keep)
        sender = CallbackSender(s, metrics)
        runner = FeedbackRunner(
            store=store,
            results=results,
            generator=FeedbackGenerator(llm, s, metrics),
            sender=sender,
        )
        dispatcher = MemoryDispatcher(
            runner, workers=s.feedback_workers, max_queued=s.feedback_queue_max
        )
        dispatcher.start()
        try:
            yield FeedbackService(
                store=store, results=results, dispatcher=dispatcher, settings=s, metrics=metrics
            )
        finally:
            await dispatcher.close()
            await sender.aclose()
        return
    async with open_saq_runtime(s, llm, metrics, redis) as (
        queue,
        runner,
        redis_store,
        redis_results,
    ):
        worker = None
        task = None
        if s.feedback_in_process_workers:
            worker = build_worker(queue, runner, s, own_signals=False)
            task = asyncio.get_running_loop().create_task(worker.start(), name="feedback-worker")
        try:
            yield FeedbackService(
                store=redis_store,
                results=redis_results,
                dispatcher=SaqDispatcher(queue, s),
                settings=s,
                metrics=metrics,
            )
        finally:
            if worker is not None and task is not None:
                await worker.stop()
                await asyncio.gather(task, return_exceptions=True)
