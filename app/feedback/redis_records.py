"""Jobs and results in Redis (``REDIS_URL``): shared by every gateway and worker process.

Keys, under ``FEEDBACK_REDIS_PREFIX`` (default ``eco:feedback:``)::

    job:<jobId>         the JobRecord as JSON; EX FEEDBACK_RESULT_TTL_SECONDS
    key:<sha256(key)>   the job id an Idempotency-Key names (SET NX); same expiry
    claim:<what>:<id>   one-time claims (SET NX): the result is published once
    results             stream of finished results (XADD MAXLEN ~ FEEDBACK_RESULTS_KEEP);
                        entry ids are the SSE event ids
    dead                the last dead-lettered job ids (LPUSH, LTRIM 1000), for operators

The queue itself is saq's (:mod:`app.feedback.queue_saq`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from redis.asyncio import Redis

from app.feedback.models import FeedbackResult, JobRecord

__all__ = ["RedisJobStore", "RedisResultLog"]

_CURSOR = re.compile(r"\d{1,20}-\d{1,20}|0")
_MAX_BLOCK_MS = 1000  # below the client's socket timeout


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisJobStore:
    def __init__(self, redis: Redis, *, prefix: str, ttl: float) -> None:
        self._redis = redis
        self._prefix = prefix
        self._ttl_ms = max(1, int(ttl * 1000))

    def _key(self, key: str) -> str:
        return f"{self._prefix}key:{hashlib.sha256(key.encode()).hexdigest()}"

    async def get(self, job_id: str) -> JobRecord | None:
        raw = await self._redis.get(f"{self._prefix}job:{job_id}")
        return None if raw is None else JobRecord.model_validate_json(raw)

    async def put(self, record: JobRecord) -> None:
        await self._redis.set(
            f"{self._prefix}job:{record.jobId}", record.model_dump_json(), px=self._ttl_ms
        )

    async def job_for_key(self, key: str) -> str | None:
        raw = await self._redis.get(self._key(key))
        return None if raw is None else _text(raw)

    async def bind_key(self, key: str, job_id: str) -> str | None:
        name = self._key(key)
        if await self._redis.set(name, job_id, nx=True, px=self._ttl_ms):
            return None
        existing = await self._redis.get(name)
        return job_id if existing is None else _text(existing)

    async def claim(self, what: str, job_id: str) -> bool:
        name = f"{self._prefix}claim:{what}:{job_id}"
        return bool(await self._redis.set(name, b"1", nx=True, px=self._ttl_ms))

    async def dead_letter(self, job_id: str) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.lpush(f"{self._prefix}dead", job_id)
        pipe.ltrim(f"{self._prefix}dead", 0, 999)
        await pipe.execute()


class RedisResultLog:
    def __init__(self, redis: Redis, *, prefix: str, keep: int) -> None:
        self._redis = redis
        self._stream = f"{prefix}results"
        self._keep = keep

    async def append(self, result: FeedbackResult) -> str:
        entry = await self._redis.xadd(
            self._stream, {"r": result.model_dump_json()}, maxlen=self._keep, approximate=True
        )
        return _text(entry)

    async def tail(self) -> str:
        last = await self._redis.xrevrange(self._stream, "+", "-", count=1)
        return _text(last[0][0]) if last else "0"

    def valid_cursor(self, cursor: str) -> bool:
        return bool(_CURSOR.fullmatch(cursor))

    async def after(self, cursor: str, wait: float) -> list[tuple[str, str]]:
        block = max(1, min(_MAX_BLOCK_MS, int(wait * 1000)))
        reply: Any = await self._redis.xread({self._stream: cursor}, count=500, block=block)
        entries: list[Any]
        if isinstance(reply, dict):  # RESP3
            entries = [e for items in reply.values() for e in items]
        else:
            entries = [e for _key, items in reply or () for e in items]
        out = []
        for entry_id, fields in entries:
            values = {_text(k): _text(v) for k, v in fields.items()}
            if "r" in values:
                out.append((_text(entry_id), values["r"]))
        return out
