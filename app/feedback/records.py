"""Where jobs and finished results are kept: the two interfaces, and their in-process versions.

``JobStore``: one :class:`JobRecord` per job id (kept ``FEEDBACK_RESULT_TTL_SECONDS``), the
``Idempotency-Key`` -> job id map, and one-time claims (the result is published once).
``ResultLog``: the finished results in order, for ``/ai/feedback/results/stream``; an event id
is a cursor, and ``after(cursor)`` gives what came later (``Last-Event-ID`` resume).

The in-process versions live and die with the process (no ``REDIS_URL``: README says so);
:mod:`app.feedback.redis_records` keeps the same in Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from typing import Protocol

from app.feedback.models import FeedbackResult, JobRecord

__all__ = ["JobStore", "MemoryJobStore", "MemoryResultLog", "ResultLog"]


class JobStore(Protocol):
    async def get(self, job_id: str) -> JobRecord | None: ...

    async def put(self, record: JobRecord) -> None: ...

    async def job_for_key(self, key: str) -> str | None:
        """The job an ``Idempotency-Key`` already names, if any."""
        ...

    async def bind_key(self, key: str, job_id: str) -> str | None:
        """Name ``job_id`` by ``key`` unless the key names a job already: then that job's id."""
        ...

    async def claim(self, what: str, job_id: str) -> bool:
        """True the first time ``what`` is claimed for ``job_id`` (e.g. its publication)."""
        ...

    async def dead_letter(self, job_id: str) -> None:
        """Remember a job whose result could not be delivered (operators look here)."""
        ...


class ResultLog(Protocol):
    async def append(self, result: FeedbackResult) -> str:
        """Add a finished result; its event id."""
        ...

    async def tail(self) -> str:
        """The cursor of "now": ``after(tail())`` gives only results added later."""
        ...

    def valid_cursor(self, cursor: str) -> bool: ...

    async def after(self, cursor: str, wait: float) -> list[tuple[str, str]]:
        """``(event id, FeedbackResult JSON)`` after ``cursor``, oldest first; waits up to
        ``wait`` seconds for one, ``[]`` when none came."""
        ...


class MemoryJobStore:
    def __init__(self, *, ttl: float, max_jobs: int) -> None:
        self._ttl = ttl
        self._max = max_jobs
        self._jobs: OrderedDict[str, tuple[float, JobRecord]] = OrderedDict()
        self._keys: dict[str, tuple[float, str]] = {}
        self._claims: set[tuple[str, str]] = set()
        self.dead: deque[str] = deque(maxlen=1000)

    def _evict(self) -> None:
        cutoff = time.monotonic() - self._ttl
        while self._jobs:
            job_id, (stored, _) = next(iter(self._jobs.items()))
            if stored > cutoff and len(self._jobs) <= self._max:
                break
            del self._jobs[job_id]
            self._claims.discard(("published", job_id))
        self._keys = {k: v for k, v in self._keys.items() if v[0] > cutoff}

    async def get(self, job_id: str) -> JobRecord | None:
        entry = self._jobs.get(job_id)
        return None if entry is None else entry[1].model_copy(deep=True)

    async def put(self, record: JobRecord) -> None:
        self._evict()
        stored = self._jobs.get(record.jobId, (time.monotonic(), record))[0]
        self._jobs[record.jobId] = (stored, record.model_copy(deep=True))

    async def job_for_key(self, key: str) -> str | None:
        entry = self._keys.get(key)
        return None if entry is None else entry[1]

    async def bind_key(self, key: str, job_id: str) -> str | None:
        existing = await self.job_for_key(key)
        if existing is not None:
            return existing
        self._keys[key] = (time.monotonic(), job_id)
        return None

    async def claim(self, what: str, job_id: str) -> bool:
        if (what, job_id) in self._claims:
            return False
        self._claims.add((what, job_id))
        return True

    async def dead_letter(self, job_id: str) -> None:
        self.dead.append(job_id)


class MemoryResultLog:
    """Ids are sequence numbers from 1; the last ``keep`` results are kept."""

    def __init__(self, keep: int) -> None:
        self._items: deque[tuple[int, str]] = deque(maxlen=keep)
        self._seq = 0
        self._changed = asyncio.Event()

    async def append(self, result: FeedbackResult) -> str:
        self._seq += 1
        self._items.append((self._seq, result.model_dump_json()))
        self._changed.set()
        self._changed = asyncio.Event()
        return str(self._seq)

    async def tail(self) -> str:
        return str(self._seq)

    def valid_cursor(self, cursor: str) -> bool:
        return cursor.isascii() and cursor.isdigit() and len(cursor) <= 18

    async def after(self, cursor: str, wait: float) -> list[tuple[str, str]]:
        seq = int(cursor)
        if seq >= self._seq:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), wait)
            except TimeoutError:
                return []
        return [(str(n), data) for n, data in self._items if n > seq]
