"""Pipeline events -> server-sent events, with the guarantee the old server broke:
nothing, not even a ping, is ever sent after the terminal event.

sse-starlette frames the events, applies the send timeout, notices the client leaving
and then cancels everything (which closes the upstream request). Keep-alive is ours,
deliberately (do not "fix" by switching sse-starlette's ``ping`` back on): its ping task
runs beside the data and can wake while a finished stream winds down, landing a ``: ping``
after ``close`` (tests/test_sse_terminal.py reproduces that). Here one generator writes
every frame: the pipeline runs as sse-starlette's ``data_sender_callable`` and feeds a
small channel; ``frames()`` reads it and, after ``ping_interval`` of silence, yields a
``: ping`` comment itself. It returns right after the terminal event, so there is no
later frame to send.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.chat.events import (
    MESSAGE_CHUNK,
    MESSAGE_DONE,
    Delta,
    Done,
    Failed,
    StreamEvent,
    envelope_json,
)
from app.errors import InternalFailure
from app.metrics import Metrics

__all__ = ["event_source_response", "to_sse"]

log = logging.getLogger(__name__)

_BUFFER = 16  # events the pipeline may run ahead of a slow client


def to_sse(event: StreamEvent, event_id: int) -> ServerSentEvent:
    if isinstance(event, Delta):
        data = envelope_json(200, MESSAGE_CHUNK, event.text)
        return ServerSentEvent(data=data, event="challenge", id=str(event_id))
    if isinstance(event, Done):
        data = envelope_json(200, MESSAGE_DONE, event.payload)
        return ServerSentEvent(data=data, event="close", id=str(event_id))
    error = event.error
    data = envelope_json(error.status, error.message, error.data)
    return ServerSentEvent(data=data, event="error", id=str(event_id))


def event_source_response(
    events: AsyncIterator[StreamEvent],
    *,
    ping_interval: float,
    send_timeout: float,
    metrics: Metrics,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:
    sender, receiver = anyio.create_memory_object_stream[StreamEvent](_BUFFER)

    async def produce() -> None:
        async with sender, aclosing(events):  # type: ignore[type-var]
            try:
                async for event in events:
                    await sender.send(event)
                    if not isinstance(event, Delta):
                        return
            except Exception:
                log.exception("pipeline raised instead of yielding Failed")
                await sender.send(Failed(InternalFailure("pipeline raised")))

    async def frames() -> AsyncIterator[ServerSentEvent]:
        outcome = "disconnected"
        metrics.open_streams.inc()
        try:
            async with receiver:
                event_id = 0
                while True:
                    event: StreamEvent | None = None
                    with anyio.move_on_after(ping_interval):
                        try:
                            event = await receiver.receive()
                        except anyio.EndOfStream:
                            event = Failed(InternalFailure("stream ended without a result"))
                    if event is None:
                        yield ServerSentEvent(comment="ping")
                        continue
                    event_id += 1
                    if not isinstance(event, Delta):
                        outcome = "close" if isinstance(event, Done) else str(event.error.status)
                    yield to_sse(event, event_id)
                    if not isinstance(event, Delta):
                        return
        finally:
            metrics.open_streams.dec()
            metrics.requests.labels(endpoint, outcome).inc()
            if outcome == "disconnected":
                metrics.client_disconnects.inc()

    return EventSourceResponse(
        frames(),
        ping=0,  # keep-alive comes from frames(), see the module docstring
        send_timeout=send_timeout,
        data_sender_callable=produce,
        headers=headers,
    )
