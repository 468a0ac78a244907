"""Stream logs in Redis, so that a reconnect landing on another gateway process resumes there.

Used by :class:`app.streams.hub.StreamHub` when ``REDIS_URL`` is set. The process that
generates a stream keeps it in memory (its own reconnects are served from there) and writes it
behind to Redis; any other process reads it from Redis. Keys, under one hash tag per stream so
they share a cluster slot::

    {prefix}{<streamId>}:events   stream: entry id 0-<seq>, fields n (event name), s (status),
                                  b (display text, or the envelope JSON of close/error);
                                  PEXPIRE STREAM_RESUME_TTL_SECONDS after every write
    {prefix}{<streamId>}:live     set while the owning process generates the stream: PX 5 s,
                                  refreshed every second, deleted after the terminal event
    {prefix}{<streamId>}:reader   set while a reader in another process follows it: PX 3 s,
                                  refreshed every second; keeps a generation in its resume
                                  grace alive on the owner
    {prefix}{<streamId>}:owner    who may resume it (an opaque hash of its client); expires
                                  with the events

Writes are batched: one pipeline per 50 ms for every stream of the process (not one round
trip per token), so a slow Redis never slows a stream; a failed write is logged and dropped
(only resuming on another process suffers). A follower blocks in ``XREAD`` for at most a
second at a time; a stream with no terminal event and no ``live`` key has lost its owner (the
process died) and ends for the follower with the ``StreamAborted`` error.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.domain.errors import InternalFailure
from app.domain.events import Failed
from app.streams.log import LoggedEvent, StreamAborted, StreamSource, shutdown_error

__all__ = ["RedisStreamLog"]

log = logging.getLogger(__name__)

_FLUSH_INTERVAL = 0.05
_REFRESH_INTERVAL = 1.0
_LIVE_MS = 5000
_READER_MS = 3000
_READ_COUNT = 512


@dataclass(frozen=True, slots=True)
class _Keys:
    events: str
    live: str
    reader: str
    owner: str


def _text(value: object) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _records(entries: Any) -> list[LoggedEvent]:
    """``[(b"0-5", {b"n": ..., b"s": ..., b"b": ...}), ...]`` -> events; skips what it cannot read."""
    records = []
    for entry_id, fields in entries or ():
        values = {_text(key): _text(value) for key, value in fields.items()}
        try:
            seq = int(_text(entry_id).partition("-")[2])
            records.append(LoggedEvent(seq, values["n"], int(values["s"]), values["b"]))
        except (KeyError, ValueError):
            continue
    return records


def _xread_records(reply: Any) -> list[LoggedEvent]:
    if isinstance(reply, dict):  # RESP3
        return [r for entries in reply.values() for r in _records(entries)]
    return [r for _key, entries in reply or () for r in _records(entries)]


class RedisStreamLog:
    """The Redis side of the stream hub; it owns (and closes) its client."""

    def __init__(self, redis: Redis, *, prefix: str, ttl_seconds: float) -> None:
        self._redis = redis
        self._prefix = prefix
        self._ttl_ms = max(1, math.ceil(ttl_seconds * 1000))
        self._started: dict[str, str] = {}  # stream id -> owner
        self._pending: dict[str, list[LoggedEvent]] = {}
        self._failing = False

    def keys(self, stream_id: str) -> _Keys:
        base = f"{self._prefix}{{{stream_id}}}"
        return _Keys(f"{base}:events", f"{base}:live", f"{base}:reader", f"{base}:owner")

    async def close(self) -> None:
        await self._redis.aclose()

    # ------------------------------------------------------------------ the owner's side
    def started(self, stream_id: str, owner: str) -> None:
        self._started[stream_id] = owner

    def record(self, stream_id: str, record: LoggedEvent) -> None:
        self._pending.setdefault(stream_id, []).append(record)

    async def run(self, live_ids: Callable[[], list[str]]) -> None:
        """Write behind until cancelled; refreshes the ``live`` keys of ``live_ids()``."""
        refreshed = time.monotonic()
        while True:
            await anyio.sleep(_FLUSH_INTERVAL)
            refresh: list[str] = []
            if time.monotonic() - refreshed >= _REFRESH_INTERVAL:
                refreshed = time.monotonic()
                refresh = live_ids()
            try:
                await self.flush(refresh)
            except Exception:  # never take the hub (and every stream) down with it
                log.exception("stream log: write-behind failed")

    async def flush(self, refresh: list[str] | None = None) -> None:
        started, self._started = self._started, {}
        pending, self._pending = self._pending, {}
        touched = started.keys() | pending.keys() | set(refresh or ())
        if not touched:
            return
        pipe = self._redis.pipeline(transaction=False)
        for stream_id in touched:
            keys = self.keys(stream_id)
            records = pending.get(stream_id, [])
            ended = any(record.terminal for record in records)
            if not ended:
                pipe.set(keys.live, b"1", px=_LIVE_MS)
            # The owner outlives the events a little: refreshed with them and with ``live``.
            if stream_id in started:
                pipe.set(keys.owner, started[stream_id], px=self._ttl_ms + _LIVE_MS)
            else:
                pipe.pexpire(keys.owner, self._ttl_ms + _LIVE_MS)
            for record in records:
                fields = {"n": record.name, "s": record.status, "b": record.body}
                pipe.xadd(keys.events, fields, id=f"0-{record.seq}")  # type: ignore[arg-type]
            if records:
                pipe.pexpire(keys.events, self._ttl_ms)
            if ended:
                pipe.delete(keys.live)
        try:
            results = await pipe.execute(raise_on_error=False)
        except (RedisError, OSError) as exc:
            self._report(exc)
            return
        errors = [result for result in results if isinstance(result, Exception)]
        if errors:
            self._report(errors[0])
        elif self._failing:
            self._failing = False
            log.info("stream log: Redis writes work again")

    def _report(self, exc: BaseException) -> None:
        if not self._failing:
            self._failing = True
            log.warning(
                "stream log: Redis write failed (%s); streams still work, resuming them on "
                "another process may not",
                exc,
            )

    async def has_reader(self, stream_id: str) -> bool:
        try:
            return bool(await self._redis.exists(self.keys(stream_id).reader))
        except (RedisError, OSError):
            return False

    # ------------------------------------------------------------------ another process
    async def resume(
        self, stream_id: str, after: int, drain_expired: anyio.Event, owner: str
    ) -> StreamSource | None:
        keys = self.keys(stream_id)
        try:
            # One transaction: a consistent view of the events and the owner's liveness.
            pipe = self._redis.pipeline(transaction=True)
            pipe.xrange(keys.events, f"0-{after + 1}", "+")
            pipe.xrevrange(keys.events, "+", "-", count=1)
            pipe.exists(keys.live)
            pipe.get(keys.owner)
            backlog_raw, last_raw, live, owner_raw = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("stream log: Redis read failed (%s); cannot resume %s", exc, stream_id)
            return None
        if owner_raw is None or _text(owner_raw) != owner:
            return None  # not this caller's stream (or expired): the same answer
        backlog = _records(backlog_raw)
        last_records = _records(last_raw)
        last = last_records[0] if last_records else None
        if last is None and not live:
            return None  # unknown or expired
        if last is not None and last.terminal and last.seq <= after:
            return None  # the client has it all
        if not live and (last is None or not last.terminal):
            seq = max(after, last.seq if last else 0) + 1
            backlog.append(LoggedEvent.of(seq, Failed(StreamAborted("stream owner gone"))))
        return _RemoteSource(self, drain_expired, stream_id, backlog)


class _RemoteSource:
    """Follows a stream that another process generates (or generated)."""

    def __init__(
        self,
        log_: RedisStreamLog,
        drain_expired: anyio.Event,
        stream_id: str,
        backlog: list[LoggedEvent],
    ) -> None:
        self._log = log_
        self._redis = log_._redis
        self._drain_expired = drain_expired
        self._id = stream_id
        self._keys = log_.keys(stream_id)
        self._backlog = backlog
        self._touched = 0.0
        self._checked = time.monotonic()

    @property
    def stream_id(self) -> str:
        return self._id

    def attach(self) -> None:
        pass  # the reader lease is taken on the first read

    def release(self) -> None:
        pass  # the lease expires by itself within seconds

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        if self._backlog:
            batch = [record for record in self._backlog if record.seq > seq]
            self._backlog = []
            if batch:
                return batch
        if self._drain_expired.is_set():
            return [LoggedEvent.of(seq + 1, Failed(shutdown_error()))]
        block_ms = max(1, int(min(wait, _REFRESH_INTERVAL) * 1000))
        try:
            if time.monotonic() - self._touched >= _REFRESH_INTERVAL:
                self._touched = time.monotonic()
                await self._redis.set(self._keys.reader, b"1", px=_READER_MS)
            reply = await self._redis.xread(
                {self._keys.events: f"0-{seq}"}, count=_READ_COUNT, block=block_ms
            )
            records = _xread_records(reply)
            if records:
                return records
            if time.monotonic() - self._checked >= _REFRESH_INTERVAL:
                self._checked = time.monotonic()
                if not await self._redis.exists(self._keys.live):
                    # Finished just now, or its process died: one more read tells which.
                    records = _records(await self._redis.xrange(self._keys.events, f"0-{seq + 1}"))
                    if any(record.terminal for record in records):
                        return records
                    last = records[-1].seq if records else seq
                    return [*records, LoggedEvent.of(last + 1, Failed(StreamAborted("owner gone")))]
        except (RedisError, OSError) as exc:
            log.warning("stream log: Redis read failed (%s) while following %s", exc, self._id)
            return [LoggedEvent.of(seq + 1, Failed(InternalFailure("stream log unreadable")))]
        return []
