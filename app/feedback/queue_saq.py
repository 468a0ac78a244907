"""The durable queue (``REDIS_URL``): saq on Redis. Why saq: docs/feedback.md.

Two saq functions, each job's key chosen by us so a job is never enqueued twice:

    feedback_generate   key <jobId>                  the runner's generate step; on success
                                                     enqueues the first delivery
    feedback_deliver    key <jobId>:deliver:<n>      one callback attempt; a retry is the next
                                                     attempt, scheduled after the backoff

Surviving a crash: a generate job carries a heartbeat (``FEEDBACK_HEARTBEAT_SECONDS``,
refreshed while it runs); when its process dies the heartbeat stops, and any worker's sweep
(every ``FEEDBACK_SWEEP_SECONDS``) puts it back on the queue, up to ``_CRASH_RETRIES`` times. A
worker stopped normally (SIGTERM) puts its running jobs back at once. Deliveries are jobs
too, so a scheduled retry survives a restart.

Why retries are our own scheduled jobs and not saq's ``retries``: saq logs every retried
failure with its traceback, so a backend down for an hour would fill the log; a scheduled job
per attempt is as durable and logs one line per attempt.

``Worker.SIGNALS`` is emptied for the worker inside the gateway: saq would otherwise replace
uvicorn's SIGTERM/SIGINT handlers (and reset them to the defaults when it stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from saq import Queue, Worker
from saq.types import Context, PartialTimersDict

from app.config import FeedbackSettings
from app.feedback.runner import FeedbackRunner

__all__ = ["GENERATE", "SaqDispatcher", "build_worker"]

log = logging.getLogger(__name__)

GENERATE = "feedback_generate"
DELIVER = "feedback_deliver"
_CRASH_RETRIES = 5
_DELIVERY_TIMEOUT_MARGIN = 10


class SaqDispatcher:
    """The gateway's side: counts and enqueues."""

    def __init__(self, queue: Queue, settings: FeedbackSettings) -> None:
        self._queue = queue
        self._settings = settings

    async def pending(self) -> int:
        return await self._queue.count("queued")

    async def enqueue(self, job_id: str) -> None:
        s = self._settings
        # Generous: the heartbeat, not this, catches a dead worker.
        timeout = math.ceil(s.feedback_llm_timeout * 2 * s.feedback_generation_attempts + 60)
        await self._queue.enqueue(
            GENERATE,
            key=job_id,
            job_id=job_id,
            timeout=timeout,
            heartbeat=s.feedback_heartbeat_seconds,
            retries=_CRASH_RETRIES,
            ttl=3600,
        )


class _Jobs:
    def __init__(self, runner: FeedbackRunner, settings: FeedbackSettings) -> None:
        self._runner = runner
        self._settings = settings

    async def generate(self, ctx: Context, *, job_id: str) -> None:
        job = ctx["job"]
        beat = asyncio.create_task(self._heartbeat(ctx))
        try:
            deliver = await self._runner.generate(job_id)
        except Exception as exc:
            if job.retryable:
                raise  # saq runs it again
            await self._runner.fail(job_id, f"{type(exc).__name__} on the last attempt")
            return
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if deliver:
            await self._enqueue_delivery(job.get_queue(), job_id, 1, 0.0)

    async def deliver(self, ctx: Context, *, job_id: str, attempt: int) -> None:
        delay = await self._runner.deliver(job_id, attempt)
        if delay is not None:
            await self._enqueue_delivery(ctx["job"].get_queue(), job_id, attempt + 1, delay)

    async def _enqueue_delivery(
        self, queue: Queue, job_id: str, attempt: int, delay: float
    ) -> None:
        timeout = math.ceil(self._settings.feedback_callback_timeout) + _DELIVERY_TIMEOUT_MARGIN
        await queue.enqueue(
            DELIVER,
            key=f"{job_id}:deliver:{attempt}",
            job_id=job_id,
            attempt=attempt,
            scheduled=math.ceil(time.time() + delay) if delay > 0 else 0,
            timeout=timeout,
            retries=_CRASH_RETRIES,
            ttl=600,
        )

    async def _heartbeat(self, ctx: Context) -> None:
        job = ctx["job"]
        interval = max(0.5, self._settings.feedback_heartbeat_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                await job.update()
            except Exception as exc:  # Redis hiccup: the next beat may work
                log.warning("feedback job heartbeat failed: %s", exc)


def build_worker(
    queue: Queue, runner: FeedbackRunner, settings: FeedbackSettings, *, own_signals: bool
) -> Worker[Any]:
    """A saq worker for both functions. ``own_signals``: a process of its own (the CLI),
    where saq's SIGTERM handling stops it gracefully."""
    jobs = _Jobs(runner, settings)
    timers: PartialTimersDict = {
        "sweep": settings.feedback_sweep_seconds,
        "schedule": 1,
        "abort": 1,
        "worker_info": 10,
    }
    worker: Worker[Any] = Worker(
        queue,
        functions=[(GENERATE, jobs.generate), (DELIVER, jobs.deliver)],
        concurrency=settings.feedback_workers,
        timers=timers,
        dequeue_timeout=1.0,
    )
    if not own_signals:
        worker.SIGNALS = []
    return worker
