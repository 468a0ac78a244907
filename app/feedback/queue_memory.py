"""The embedded queue (no ``REDIS_URL``): an asyncio queue and worker tasks in the gateway.

Bounded (``FEEDBACK_QUEUE_MAX`` jobs waiting; the service answers 503 past it), worked by
``FEEDBACK_WORKERS`` tasks; a callback that fails is retried by a task that sleeps the backoff.
Everything is lost when the process stops (README "Feedback"): run with Redis for jobs that
survive a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from app.feedback.runner import FeedbackRunner

__all__ = ["MemoryDispatcher"]

log = logging.getLogger(__name__)


class MemoryDispatcher:
    def __init__(self, runner: FeedbackRunner, *, workers: int, max_queued: int) -> None:
        self._runner = runner
        self._workers = workers
        self._queue: asyncio.Queue[str] = asyncio.Queue(maxsize=max_queued)
        self._tasks: set[asyncio.Task[None]] = set()

    async def pending(self) -> int:
        return self._queue.qsize()

    async def enqueue(self, job_id: str) -> None:
        self._queue.put_nowait(job_id)  # asyncio.QueueFull past the bound

    def start(self) -> None:
        for n in range(self._workers):
            self._spawn(self._work(), f"feedback-worker-{n}")

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _work(self) -> None:
        while True:
            job_id = await self._queue.get()
            try:
                if await self._runner.generate(job_id):
                    self._spawn(self._deliver(job_id), f"feedback-delivery-{job_id}")
            except Exception as exc:
                log.exception("feedback %s: job raised", job_id)
                await self._runner.fail(job_id, type(exc).__name__)

    async def _deliver(self, job_id: str) -> None:
        attempt = 1
        try:
            while (delay := await self._runner.deliver(job_id, attempt)) is not None:
                await asyncio.sleep(delay)
                attempt += 1
        except Exception:
            log.exception("feedback %s: delivery raised", job_id)
