"""Pipeline events -> server-sent events, with the guarantee the old server broke:
nothing, not even a ping, is ever sent after the terminal event.

``EventStreamResponse`` is ours, a small ASGI response: it writes the frames ``_frames()``
yields, notices the client leaving (a task reading ``receive``) and then cancels the response,
which releases the stream and, with nobody left reading, closes the upstream request; a
watchdog drops a client that stops reading for ``SSE_SEND_TIMEOUT``. Keep-alive is ours too:
sse-starlette's ping task runs beside the data and can wake while a finished stream winds
down, landing a ``: ping`` after ``close`` (tests/test_sse_terminal.py reproduces that). Here
one generator writes every frame: ``_frames()`` reads the stream's log (:mod:`app.streams.hub`;
the generation itself runs in the stream hub, so that a reconnect can pick it up) and, after
``ping_interval`` of silence, yields a ``: ping`` comment itself. It returns right after the
terminal event, so there is no later frame to send; a resumed stream ends the same way.

Events that are ready together leave in one write (under load a reader often wakes to
several): one ``send`` per batch, not per event, is most of the gateway's per-token cost.

Ids are ``<streamId>.<seq>``. A new stream's first frame is ``id: <streamId>.0`` with the
``retry:`` hint and no data: no event reaches the client, but an EventSource that loses the
connection before the first token reconnects with that id instead of starting over.

The wire format of a frame is written here and nowhere else: :func:`frame` (``id``, ``event``,
``data``), the opening frame (``id`` and ``retry:``) and the ping. The feedback results stream
(:func:`cursor_stream_response`, endless, its ids a log's cursors) goes out through the same
writer, :func:`_paced`, as the chat streams; the event names and the JSON envelope are in
:mod:`app.domain.events`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.domain.events import CLOSE, StreamEvent
from app.metrics import Metrics
from app.streams.hub import StreamHub
from app.streams.log import StreamSource, parse_event_id

__all__ = [
    "EventStreamResponse",
    "cursor_stream_response",
    "event_source_response",
    "frame",
    "resume_response",
]

log = logging.getLogger(__name__)

_PING = b": ping\r\n\r\n"


class EventStreamResponse(Response):
    """``text/event-stream`` from an async iterator of ready-made frames (bytes)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        *,
        send_timeout: float,
        headers: Mapping[str, str] | None = None,
        prime: bool = False,
    ) -> None:
        """``prime``: ``frames`` yields an opening frame at once (a new stream, not a resume)."""
        self.status_code = 200
        self.background = None
        self._frames = frames
        self._send_timeout = send_timeout
        self._prime = prime
        self._sending_since: float | None = None
        self._send_check: asyncio.TimerHandle | None = None
        self.init_headers(
            {
                "cache-control": "no-store",
                "connection": "keep-alive",
                "x-accel-buffering": "no",  # nginx: do not buffer the stream
                **(headers or {}),
            }
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with aclosing(self._frames):  # type: ignore[type-var]
            # A new stream's opening frame is ready at once, and taking it starts the
            # generation, which then runs while the headers go out (not after them).
            first = None
            if self._prime:
                first = await anext(self._frames)
                await asyncio.sleep(0)  # let the generation send its upstream request first
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            # One plain task watches for the client leaving and one timer for a client that
            # stopped reading; either cancels the scope. Plain asyncio tasks, not an anyio task
            # group: its spawns cost more per request than the rest of this set-up
            # (bench/README.md "Profile").
            loop = asyncio.get_running_loop()
            with anyio.CancelScope() as cancel:
                watcher = loop.create_task(_watch_client(receive, cancel))
                self._arm_send_check(loop, cancel)
                try:
                    if first is not None:
                        await self._send(send, first)
                    async for chunk in self._frames:
                        await self._send(send, chunk)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:  # ASGI 2.4 servers may raise on a send to a closed connection
                    pass
                finally:
                    watcher.cancel()
                    if self._send_check is not None:
                        self._send_check.cancel()

    async def _send(self, send: Send, chunk: bytes) -> None:
        self._sending_since = time.monotonic()
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        self._sending_since = None

    def _arm_send_check(self, loop: asyncio.AbstractEventLoop, cancel: anyio.CancelScope) -> None:
        """Cancel the response when one write has waited ``send_timeout``, checked every half
        of it: one timer per stream, not one per frame."""
        self._send_check = loop.call_later(self._send_timeout / 2, self._check_send, loop, cancel)

    def _check_send(self, loop: asyncio.AbstractEventLoop, cancel: anyio.CancelScope) -> None:
        since = self._sending_since
        if since is not None and time.monotonic() - since >= self._send_timeout:
            log.info("client stopped reading for %.0f s: dropping it", self._send_timeout)
            self._send_check = None
            cancel.cancel()
            return
        self._arm_send_check(loop, cancel)


async def _watch_client(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def frame(event_id: str, event: str, data: str) -> str:
    """One event's frame. ``data`` must be one line: a JSON envelope is (its strings escape CR
    and LF)."""
    return f"id: {event_id}\r\nevent: {event}\r\ndata: {data}\r\n\r\n"


def _opening(event_id: str, retry_ms: int) -> bytes:
    """A stream's first frame: no event, only the id to reconnect with and the ``retry:`` hint."""
    return f"id: {event_id}\r\nretry: {retry_ms}\r\n\r\n".encode()


async def _paced(
    opening: bytes | None,
    batches: Callable[[float], Awaitable[tuple[str, bool]]],
    ping_interval: float,
) -> AsyncGenerator[bytes]:
    """The one SSE writer: ``opening``, then each batch of frames as it comes, a ping after
    ``ping_interval`` of silence, and nothing after the batch that ends the stream.
    ``batches(wait)`` gives the frames ready within ``wait`` seconds ("" for none) and whether
    they end the stream."""
    if opening is not None:
        yield opening
    quiet_since = time.monotonic()
    while True:
        wait = ping_interval - (time.monotonic() - quiet_since)
        if wait <= 0:
            yield _PING
            quiet_since = time.monotonic()
            continue
        frames, last = await batches(wait)
        if frames:
            yield frames.encode()
            quiet_since = time.monotonic()
        if last:
            return


async def _frames(
    source: Callable[[], StreamSource],
    after: int,
    *,
    opening: int | None,
    ping_interval: float,
    metrics: Metrics,
    endpoint: str,
) -> AsyncIterator[bytes]:
    """Every frame of one response: the events of the stream after ``after``, pings while
    it is quiet, and nothing after its terminal event. ``opening`` is the ``retry:`` hint of a
    new stream's first frame (None on a resume)."""
    outcome = "disconnected"
    stream = source()  # here, not in the handler: a HEAD never gets this far
    stream.attach()
    metrics.open_streams.inc()
    stream_id = stream.stream_id
    seq = after

    async def batch(wait: float) -> tuple[str, bool]:
        nonlocal seq, outcome
        frames: list[str] = []
        for record in await stream.events_after(seq, wait):
            if record.seq <= seq:
                continue
            seq = record.seq
            frames.append(frame(f"{stream_id}.{seq}", record.name, record.data))
            if record.terminal:
                outcome = "close" if record.name == CLOSE else str(record.status)
                return "".join(frames), True
        return "".join(frames), False

    try:
        first = None if opening is None else _opening(f"{stream_id}.0", opening)
        async with aclosing(_paced(first, batch, ping_interval)) as paced:
            async for chunk in paced:
                yield chunk
    finally:
        stream.release()
        metrics.open_streams.dec()
        metrics.requests.labels(endpoint, outcome).inc()
        if outcome == "disconnected":
            metrics.client_disconnects.inc()


def event_source_response(
    events: AsyncIterator[StreamEvent],
    *,
    streams: StreamHub,
    ping_interval: float,
    send_timeout: float,
    retry_ms: int,
    metrics: Metrics,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    owner: str = "",
) -> EventStreamResponse:
    """A new stream: its generation starts in ``streams`` when the response starts; only
    ``owner`` may resume it."""
    frames = _frames(
        lambda: streams.start(events, owner),
        0,
        opening=retry_ms,
        ping_interval=ping_interval,
        metrics=metrics,
        endpoint=endpoint,
    )
    return EventStreamResponse(frames, send_timeout=send_timeout, headers=headers, prime=True)


async def resume_response(
    last_event_id: str,
    *,
    streams: StreamHub,
    ping_interval: float,
    send_timeout: float,
    metrics: Metrics,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    owner: str = "",
) -> Response:
    """An EventSource reconnecting with ``Last-Event-ID``: the rest of that stream, or 204
    (nothing more to send, no such stream kept, or not ``owner``'s), which makes the browser
    stop."""
    parsed = parse_event_id(last_event_id)
    source = None if parsed is None else await streams.resume(*parsed, owner)
    if parsed is None or source is None:
        log.info(
            "reconnect with Last-Event-ID %r: nothing to resume for this caller (204)",
            last_event_id[:80],
        )
        return Response(status_code=204, headers=headers)
    log.info("reconnect resumes stream %s after event %d", *parsed)
    found: StreamSource = source
    frames = _frames(
        lambda: found,
        parsed[1],
        opening=None,
        ping_interval=ping_interval,
        metrics=metrics,
        endpoint=endpoint,
    )
    return EventStreamResponse(frames, send_timeout=send_timeout, headers=headers)


def cursor_stream_response(
    cursor: str,
    events_after: Callable[[str, float], Awaitable[list[tuple[str, str, str]]]],
    *,
    retry_ms: int,
    ping_interval: float,
    send_timeout: float,
) -> EventStreamResponse:
    """An endless stream whose event ids are cursors of a log, from ``cursor`` on:
    ``events_after(cursor, wait)`` gives the events after one as ``(id, event, data)``,
    waiting up to ``wait`` seconds for one. The opening frame carries ``cursor``, so a listener
    that drops before its first event misses nothing either."""

    async def batch(wait: float) -> tuple[str, bool]:
        nonlocal cursor
        events = await events_after(cursor, wait)
        if events:
            cursor = events[-1][0]
        return "".join(frame(*event) for event in events), False

    frames = _paced(_opening(cursor, retry_ms), batch, ping_interval)
    return EventStreamResponse(frames, send_timeout=send_timeout, prime=True)
