"""Pipeline events -> server-sent events, with the guarantee the old server broke:
nothing, not even a ping, is ever sent after the terminal event.

sse-starlette frames the events, applies the send timeout and notices the client leaving
(it then cancels the response). Keep-alive is ours, deliberately (do not "fix" by switching
sse-starlette's ``ping`` back on): its ping task runs beside the data and can wake while a
finished stream winds down, landing a ``: ping`` after ``close`` (tests/test_sse_terminal.py
reproduces that). Here one generator writes every frame: ``_frames()`` reads the stream's log
(:mod:`app.chat.streams`; the generation itself runs in the stream hub, so that a reconnect
can pick it up) and, after ``ping_interval`` of silence, yields a ``: ping`` comment itself.
It returns right after the terminal event, so there is no later frame to send; a resumed
stream ends the same way.

Ids are ``<streamId>.<seq>``. A new stream's first frame is ``id: <streamId>.0`` with the
``retry:`` hint and no data: no event reaches the client, but an EventSource that loses the
connection before the first token reconnects with that id instead of starting over.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.responses import Response

from app.chat.events import StreamEvent
from app.chat.streams import LoggedEvent, StreamHub, StreamSource, parse_event_id
from app.metrics import Metrics

__all__ = ["event_source_response", "resume_response", "to_sse"]

log = logging.getLogger(__name__)


def to_sse(event: StreamEvent, event_id: int | str) -> ServerSentEvent:
    """One pipeline event as a server-sent event with the given id."""
    record = LoggedEvent.of(0, event)
    return ServerSentEvent(data=record.data, event=record.name, id=str(event_id))


def _event(stream_id: str, record: LoggedEvent) -> ServerSentEvent:
    return ServerSentEvent(data=record.data, event=record.name, id=f"{stream_id}.{record.seq}")


async def _frames(
    source: Callable[[], StreamSource],
    after: int,
    *,
    opening: int | None,
    ping_interval: float,
    metrics: Metrics,
    endpoint: str,
) -> AsyncIterator[ServerSentEvent]:
    """Every frame of one response: the events of the stream after ``after``, pings while
    it is quiet, and nothing after its terminal event. ``opening`` is the ``retry:`` hint of a
    new stream's first frame (None on a resume)."""
    outcome = "disconnected"
    stream = source()  # here, not in the handler: a HEAD never gets this far
    stream.attach()
    metrics.open_streams.inc()
    try:
        if opening is not None:
            yield ServerSentEvent(id=f"{stream.stream_id}.0", retry=opening)
        seq = after
        quiet_since = anyio.current_time()
        while True:
            wait = ping_interval - (anyio.current_time() - quiet_since)
            if wait <= 0:
                yield ServerSentEvent(comment="ping")
                quiet_since = anyio.current_time()
                continue
            for record in await stream.events_after(seq, wait):
                if record.seq <= seq:
                    continue
                seq = record.seq
                yield _event(stream.stream_id, record)
                quiet_since = anyio.current_time()
                if record.terminal:
                    outcome = "close" if record.name == "close" else str(record.status)
                    return
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
) -> EventSourceResponse:
    """A new stream: its generation starts in ``streams`` when the response starts."""
    frames = _frames(
        lambda: streams.start(events),
        0,
        opening=retry_ms,
        ping_interval=ping_interval,
        metrics=metrics,
        endpoint=endpoint,
    )
    return EventSourceResponse(
        frames,
        ping=0,  # keep-alive comes from _frames(), see the module docstring
        send_timeout=send_timeout,
        headers=headers,
    )


async def resume_response(
    last_event_id: str,
    *,
    streams: StreamHub,
    ping_interval: float,
    send_timeout: float,
    metrics: Metrics,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An EventSource reconnecting with ``Last-Event-ID``: the rest of that stream, or 204
    (nothing more to send, or no such stream kept), which makes the browser stop."""
    parsed = parse_event_id(last_event_id)
    source = None if parsed is None else await streams.resume(*parsed)
    if parsed is None or source is None:
        log.info("reconnect with Last-Event-ID %r: nothing to resume (204)", last_event_id[:80])
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
    return EventSourceResponse(frames, ping=0, send_timeout=send_timeout, headers=headers)
