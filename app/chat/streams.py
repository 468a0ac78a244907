"""Streams that outlive their connection: Last-Event-ID resume and the shutdown drain.

A GET stream's generation runs in a task of the :class:`StreamHub` (which the lifespan owns),
not in the response: it appends every event to the stream's log, and each response,
the first one or a reconnect, is only a reader of that log. So an EventSource that loses its
connection and reconnects with ``Last-Event-ID`` gets the events after that id, then the live
ones, then the terminal event, from the same single generation.

Ids: every event's id is ``<streamId>.<seq>``; ``streamId`` is a fresh random 128-bit hex (not
the request id: ``X-Request-Id`` may come from the caller, and the stream id is the only key to
a stream's text, so it must be unguessable). ``seq`` counts the stream's events from 1. A new
stream opens with ``id: <streamId>.0`` and ``retry:`` in a frame without data (no event is
dispatched, but the browser remembers the id), so a drop even before the first token resumes.

What a reconnect (``Last-Event-ID: <streamId>.<n>``) gets:
- the stream is live or kept, and has events after ``n``: HTTP 200, those events, then the
  live ones, then the terminal event, and nothing after it (as for any stream);
- the client already has the terminal event, or the id names no kept stream (unknown,
  malformed, expired): HTTP 204 with no body, which makes an EventSource stop for good;
- the generation was stopped because its client left: the missing events, then one ``error``
  (status 499, :class:`StreamAborted`): never a new generation.

Kept where: in this process's memory, and also in Redis when ``REDIS_URL`` is set (see
:mod:`app.chat.redis_streams`), so a reconnect that lands on another gateway process replays
and follows it there. Kept how long: ``STREAM_RESUME_TTL_SECONDS`` after the stream's last event.

Client gone: with ``STREAM_RESUME_GRACE_SECONDS=0`` (the default) the generation is cancelled
the moment its last reader leaves, closing the upstream request at once, as before; with a
grace it keeps running that long waiting for a reconnect (a live resume), then is cancelled.

Shutdown: on SIGTERM (or SIGINT) uvicorn stops accepting and waits for open connections; the
hub lets open streams run for ``SHUTDOWN_GRACE_SECONDS``, then ends each remaining one with one
``error`` 503 carrying a retry hint (its upstream request is closed). A stream asked for while
draining gets that error at once. sse-starlette's own drain, which cancels every stream the
moment the signal arrives, is switched off for this (process-wide: ``AppStatus``).

Deliberate choices:
- The generation runs ahead of a slow reader (the log is not bounded by the reader): the
  reader's speed only matters to ``SSE_SEND_TIMEOUT``, and a generation is bounded anyway.
- A reconnect is not a new request: no rate-limit token, no admission check, no new turn.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskGroup
from sse_starlette.sse import AppStatus

from app.chat.events import (
    MESSAGE_CHUNK,
    MESSAGE_DONE,
    Delta,
    Done,
    Failed,
    StreamEvent,
    envelope_json,
)
from app.config import Settings
from app.errors import GatewayError, InternalFailure, Overloaded

if TYPE_CHECKING:
    from app.chat.redis_streams import RedisStreamLog

__all__ = [
    "LoggedEvent",
    "StreamAborted",
    "StreamHub",
    "StreamSource",
    "open_stream_hub",
    "parse_event_id",
    "shutdown_error",
]

log = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = "서버가 점검을 위해 잠시 멈춰요. 잠시 후 다시 시도해 주세요."
SHUTDOWN_RETRY_AFTER = 5.0
_MAX_ENDED_STREAMS = 5000  # besides the TTL: kept finished streams in this process
_STREAM_ID_CHARS = frozenset("0123456789abcdef")


class StreamAborted(GatewayError):
    """Sent to a reconnect when the generation had been stopped after its client left."""

    status = 499  # "client closed request", as the POST endpoints answer a caller that left
    default_message = "연결이 끊긴 사이 답변이 중단되었어요. 다시 질문해 주세요."


def shutdown_error() -> Overloaded:
    return Overloaded("shutting down", retry_after=SHUTDOWN_RETRY_AFTER, message=SHUTDOWN_MESSAGE)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a stream as kept in its log.

    ``body`` is the display text of a ``challenge`` (its envelope is built when sent: most
    events are a few characters), the whole envelope JSON of a ``close`` or ``error``.
    """

    seq: int
    name: str  # challenge | close | error
    status: int
    body: str

    @property
    def terminal(self) -> bool:
        return self.name != "challenge"

    @property
    def data(self) -> str:
        """The SSE ``data``: always the JSON envelope."""
        if self.name == "challenge":
            return envelope_json(200, MESSAGE_CHUNK, self.body)
        return self.body

    @classmethod
    def of(cls, seq: int, event: StreamEvent) -> LoggedEvent:
        if isinstance(event, Delta):
            return cls(seq, "challenge", 200, event.text)
        if isinstance(event, Done):
            return cls(seq, "close", 200, envelope_json(200, MESSAGE_DONE, event.payload))
        error = event.error
        return cls(
            seq, "error", error.status, envelope_json(error.status, error.message, error.data)
        )


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``"<streamId>.<seq>"`` -> ``(streamId, seq)``; None for anything else."""
    stream_id, dot, seq = value.strip().rpartition(".")
    if not dot or len(stream_id) != 32 or not set(stream_id) <= _STREAM_ID_CHARS:
        return None
    if not seq.isascii() or not seq.isdigit() or len(seq) > 9:
        return None
    return stream_id, int(seq)


class StreamSource(Protocol):
    """What one response reads: a stream's events after a given one, live ones included."""

    @property
    def stream_id(self) -> str: ...

    def attach(self) -> None:
        """The response starts reading (called once, before the first ``events_after``)."""

    def release(self) -> None:
        """The response is over, whatever the reason (called once, never awaits)."""

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        """The events after ``seq``, waiting up to ``wait`` seconds for one; ``[]`` when none came."""
        ...


class _Stream:
    """A stream generated by this process: its events, readers and generation task."""

    def __init__(self, stream_id: str) -> None:
        self.id = stream_id
        self.events: list[LoggedEvent] = []
        self.readers = 0
        self.ended_at: float | None = None
        self.detach_epoch = 0
        self.scope: anyio.CancelScope | None = None
        self.stop_reason: GatewayError | None = None
        self._waiters: list[asyncio.Future[None]] = []  # readers waiting for the next event

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def append(self, event: StreamEvent) -> LoggedEvent | None:
        if self.ended:
            return None
        record = LoggedEvent.of(len(self.events) + 1, event)
        self.events.append(record)
        if record.terminal:
            self.ended_at = time.monotonic()
        if self._waiters:
            for waiter in self._waiters:
                _wake(waiter)
            self._waiters.clear()
        return record

    def stop(self, reason: GatewayError) -> None:
        """Cancel the generation; ``reason`` becomes the terminal event."""
        if self.ended or self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        if seq >= len(self.events) and not self.ended:
            # A future and a timer, not an anyio Event in a cancel scope: this runs once per
            # event per reader, and the scope was most of its cost (bench/README.md "Profile").
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_later(wait, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                if waiter in self._waiters:  # timed out or cancelled: not woken by append
                    self._waiters.remove(waiter)
        return self.events[seq:]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _LocalSource:
    def __init__(self, hub: StreamHub, stream: _Stream) -> None:
        self._hub = hub
        self._stream = stream

    @property
    def stream_id(self) -> str:
        return self._stream.id

    def attach(self) -> None:
        self._stream.readers += 1

    def release(self) -> None:
        self._hub._detach(self._stream)

    async def events_after(self, seq: int, wait: float) -> list[LoggedEvent]:
        return await self._stream.events_after(seq, wait)


class StreamHub:
    """Runs GET generations detached from their responses; see the module docstring."""

    def __init__(
        self,
        *,
        resume_ttl: float,
        resume_grace: float,
        shutdown_grace: float,
        remote: RedisStreamLog | None = None,
    ) -> None:
        self._ttl = resume_ttl
        self._grace = resume_grace
        self._shutdown_grace = shutdown_grace
        self._remote = remote
        self._streams: dict[str, _Stream] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()  # stream id -> end time, oldest first
        self._group: TaskGroup | None = None
        self._generations: set[asyncio.Task[None]] = set()
        self.draining = False
        self._drain_asked = anyio.Event()
        self.drain_expired = anyio.Event()  # set when the shutdown grace is over

    # ------------------------------------------------------------------ lifecycle
    async def run(self, group: TaskGroup) -> None:
        """Start on ``group`` (which must outlive every stream); returns at once."""
        self._group = group
        group.start_soon(self._drain)
        if self._remote is not None:
            group.start_soon(self._remote.run, self._live_ids)

    async def close(self) -> None:
        """Stop every generation still running (lifespan exit): each gets the 503 error, and
        has ended when this returns."""
        for stream in list(self._streams.values()):
            stream.stop(shutdown_error())
        while self._generations:
            await asyncio.wait(list(self._generations))

    def begin_drain(self) -> None:
        """Shutdown was asked for: new streams are refused, open ones end after the grace.

        Plain and synchronous: it also runs as a bare event-loop callback (from the signal
        handler), where no task exists to start another from; ``_drain`` waits for it."""
        self.draining = True
        self._drain_asked.set()

    async def _drain(self) -> None:
        await self._drain_asked.wait()
        log.warning(
            "shutting down: %d open stream(s) get %.0f s to finish",
            len(self._live_ids()),
            self._shutdown_grace,
        )
        await anyio.sleep(self._shutdown_grace)
        live = [stream for stream in self._streams.values() if not stream.ended]
        if live:
            log.warning("shutdown grace over: ending %d stream(s) with error 503", len(live))
        self.drain_expired.set()
        for stream in live:
            stream.stop(shutdown_error())

    # ------------------------------------------------------------------ streams
    def start(self, events: AsyncIterator[StreamEvent]) -> StreamSource:
        """A new stream generating ``events``; the caller reads it through the source."""
        self._evict()
        stream = _Stream(uuid.uuid4().hex)
        self._streams[stream.id] = stream
        if self._remote is not None:
            self._remote.started(stream.id)
        if self.draining or self._group is None:
            self._append(stream, Failed(shutdown_error()))
        else:
            # A plain task, not one of the group's: an anyio spawn cost ~75 µs of a stream's
            # start (bench/README.md "Profile"). ``close`` waits for them.
            task = asyncio.get_running_loop().create_task(self._generate(stream, events))
            self._generations.add(task)
            task.add_done_callback(self._generations.discard)
        return _LocalSource(self, stream)

    async def resume(self, stream_id: str, after: int) -> StreamSource | None:
        """A source for the events after ``after``; None when there is nothing to send."""
        self._evict()
        stream = self._streams.get(stream_id)
        if stream is not None:
            if stream.ended and after >= len(stream.events):
                return None
            return _LocalSource(self, stream)
        if self._remote is None:
            return None
        return await self._remote.resume(stream_id, after, self)

    def _live_ids(self) -> list[str]:
        return [stream.id for stream in self._streams.values() if not stream.ended]

    async def _generate(self, stream: _Stream, events: AsyncIterator[StreamEvent]) -> None:
        try:
            with anyio.CancelScope() as scope:
                stream.scope = scope
                if stream.stop_reason is not None:  # stopped before it started
                    scope.cancel()
                try:
                    async with aclosing(events):  # type: ignore[type-var]
                        async for event in events:
                            self._append(stream, event)
                            if stream.ended:
                                break  # leaving closes the pipeline (its cleanup runs here)
                        else:
                            self._append(stream, Failed(InternalFailure("no result")))
                except Exception:
                    log.exception("pipeline raised instead of yielding Failed")
                    self._append(stream, Failed(InternalFailure("pipeline raised")))
        finally:
            if not stream.ended:
                self._append(stream, Failed(stream.stop_reason or StreamAborted("client left")))

    def _append(self, stream: _Stream, event: StreamEvent) -> None:
        record = stream.append(event)
        if record is None:
            return
        if self._remote is not None:
            self._remote.record(stream.id, record)
        if record.terminal:
            self._ended[stream.id] = time.monotonic()

    def _detach(self, stream: _Stream) -> None:
        stream.readers -= 1
        if stream.readers > 0 or stream.ended:
            return
        if self._grace <= 0 or self._group is None:
            stream.stop(StreamAborted("client left"))
            return
        stream.detach_epoch += 1
        self._group.start_soon(self._expire, stream, stream.detach_epoch)

    async def _expire(self, stream: _Stream, epoch: int) -> None:
        """Stop a stream nobody reads once the resume grace is over."""
        while True:
            await anyio.sleep(self._grace)
            if stream.ended or stream.readers > 0 or stream.detach_epoch != epoch:
                return
            # A reconnect that landed on another process reads it there (Redis only).
            if self._remote is None or not await self._remote.has_reader(stream.id):
                stream.stop(StreamAborted("client left, nobody reconnected"))
                return

    def _evict(self) -> None:
        cutoff = time.monotonic() - self._ttl
        while self._ended:
            stream_id, ended_at = next(iter(self._ended.items()))
            if ended_at > cutoff and len(self._ended) <= _MAX_ENDED_STREAMS:
                break
            del self._ended[stream_id]
            self._streams.pop(stream_id, None)


class _SignalHook:
    """Chains a handler in front of uvicorn's SIGTERM/SIGINT handlers, restored on exit.

    uvicorn (``Server.capture_signals``) installs plain ``signal.signal`` handlers on the main
    thread before the lifespan starts; this one tells the hub first, then calls uvicorn's, which
    stops the accept loop and waits for open connections. Off the main thread (a server in a
    test thread), or when no Python handler is installed, there is nothing to chain.
    """

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._installed: list[tuple[signal.Signals, Any, Any]] = []

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(self._callback)
                previous(signum, frame)

            signal.signal(sig, handler)
            self._installed.append((sig, handler, previous))

    def remove(self) -> None:
        for sig, handler, previous in self._installed:
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous)
        self._installed.clear()


@asynccontextmanager
async def open_stream_hub(settings: Settings) -> AsyncIterator[StreamHub]:
    """The hub for the app's lifespan, with its Redis log when ``REDIS_URL`` is set."""
    remote: RedisStreamLog | None = None
    if settings.redis_url is not None and settings.stream_resume_ttl_seconds > 0:
        from app.chat.redis_streams import RedisStreamLog  # only deployments with Redis

        remote = RedisStreamLog.from_url(
            settings.redis_url.get_secret_value(),
            prefix=settings.redis_stream_prefix,
            ttl_seconds=settings.stream_resume_ttl_seconds,
        )
    hub = StreamHub(
        resume_ttl=settings.stream_resume_ttl_seconds,
        resume_grace=settings.stream_resume_grace_seconds,
        shutdown_grace=settings.shutdown_grace_seconds,
        remote=remote,
    )
    # Ours replaces sse-starlette's drain, which would cancel every stream on the signal.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    hook = _SignalHook(hub.begin_drain)
    try:
        async with anyio.create_task_group() as group:
            await hub.run(group)
            hook.install()
            try:
                yield hub
            finally:
                hook.remove()
                await hub.close()
                group.cancel_scope.cancel()
    finally:
        if remote is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await remote.flush()
            await remote.close()
